import { setTimeout as delay } from 'node:timers/promises';
import type { ClusterOptions } from './cluster.ts';
import type { KubeAdmin } from './kube.ts';
import { ensureNode, podName, startPod, stopPod } from './kubelet.ts';

/**
 * Who writes a Service's EndpointSlices in a discovery test. The discovery tests run against both:
 * slices the harness writes itself (one per Service, exact shapes, instant), and the real
 * EndpointSlice controller of kube-controller-manager turning Pods into slices (its own names,
 * labels, targetRef, nodeName, zone, up to 100 endpoints per slice, its own update pattern).
 */
export interface EndpointProducer {
  readonly name: string;
  readonly clusterOptions: ClusterOptions;
  /** Once per cluster, before the first Service. */
  prepare(admin: KubeAdmin): Promise<void>;
  /** A Service whose EndpointSlices list `addresses` (ready) when this returns. */
  createService(admin: KubeAdmin, ns: string, name: string, addresses: string[]): Promise<void>;
  /**
   * The Service's endpoints become `addresses`; returns once its EndpointSlices say so (the
   * controller may take a while: after an API server restart its informers back off like any
   * client-go client, up to 30 s).
   */
  setAddresses(admin: KubeAdmin, ns: string, name: string, addresses: string[]): Promise<void>;
}

const servicePort = { name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 };

const readyEndpoint = (a: string): Record<string, unknown> => ({
  addresses: [a],
  conditions: { ready: true },
});

/** The harness writes one EndpointSlice per Service, `<service>-a`, as a test fixture. */
export const harnessSlices: EndpointProducer = {
  name: 'harness-written slices',
  clusterOptions: {},
  prepare: () => Promise.resolve(),
  async createService(admin, ns, name, addresses) {
    await admin.apply({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: ns },
      spec: { ports: [servicePort] },
    });
    await admin.apply({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `${name}-a`, namespace: ns, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      endpoints: addresses.map(readyEndpoint),
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    });
  },
  async setAddresses(admin, ns, name, addresses) {
    await admin.patch('EndpointSlice', `${name}-a`, ns, { endpoints: addresses.map(readyEndpoint) });
  },
};

interface SliceList {
  items: { endpoints?: { addresses: string[]; conditions?: { ready?: boolean } }[] | null }[];
}

/** The ready addresses in the Service's EndpointSlices, as the API server has them now. */
export async function readyAddresses(admin: KubeAdmin, ns: string, service: string): Promise<string[]> {
  const list = await admin.request<SliceList>(
    'GET',
    `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices?labelSelector=${encodeURIComponent(`kubernetes.io/service-name=${service}`)}`,
  );
  return list.items
    .flatMap((s) => s.endpoints ?? [])
    .filter((e) => e.conditions?.ready !== false)
    .flatMap((e) => e.addresses)
    .sort();
}

async function waitForSlices(admin: KubeAdmin, ns: string, name: string, addresses: string[]): Promise<void> {
  const want = [...addresses].sort().join();
  const deadline = Date.now() + 90_000;
  for (;;) {
    const have = (await readyAddresses(admin, ns, name)).join();
    if (have === want) return;
    if (Date.now() > deadline)
      throw new Error(`EndpointSlice controller: ${ns}/${name} has [${have}] after 90 s, want [${want}]`);
    await delay(100);
  }
}

/**
 * Services with a selector and Pods whose status the harness writes as a kubelet would; the
 * EndpointSlice controller of kube-controller-manager writes the slices. An address change is a
 * rolling update: the new pods start and turn Ready, then the old ones are deleted.
 */
export const controllerSlices: EndpointProducer = {
  name: 'EndpointSlice controller',
  clusterOptions: { controllerManager: true },
  prepare: (admin) => ensureNode(admin),
  async createService(admin, ns, name, addresses) {
    await admin.apply({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: ns },
      spec: { selector: { app: name }, ports: [servicePort] },
    });
    await Promise.all(addresses.map((ip) => startPod(admin, ns, name, ip)));
    await waitForSlices(admin, ns, name, addresses);
  },
  async setAddresses(admin, ns, name, addresses) {
    const current = await readyAddresses(admin, ns, name);
    for (const ip of addresses.filter((a) => !current.includes(a))) await startPod(admin, ns, name, ip);
    for (const ip of current.filter((a) => !addresses.includes(a)))
      await stopPod(admin, ns, podName(name, ip));
    await waitForSlices(admin, ns, name, addresses);
  },
};

export const endpointProducers: readonly EndpointProducer[] = [harnessSlices, controllerSlices];
