import { KubeError, type KubeAdmin } from './kube.ts';

/**
 * What a kubelet and a scheduler would do for the test cluster, which has no nodes: a Node object
 * (the EndpointSlice controller skips pods whose node it cannot find, and takes the zone from it),
 * Pods bound to it at creation, and their status (IP, phase, Ready) written through the status
 * subresource, as the kubelet writes it. Nothing runs: the addresses are data only.
 */
export const NODE = 'node-a';
export const ZONE = 'zone-a';

export async function ensureNode(admin: KubeAdmin, name = NODE, zone = ZONE): Promise<void> {
  await admin
    .apply({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name, labels: { 'kubernetes.io/hostname': name, 'topology.kubernetes.io/zone': zone } },
    })
    .catch((e: unknown) => {
      if (!(e instanceof KubeError && e.status === 409)) throw e;
    });
}

/** A pod name that is a valid DNS label and says which address it has. */
export const podName = (app: string, ip: string): string => `${app}-${ip.replaceAll('.', '-')}`;

/** Creates a Pod of `app` on the node (scheduled, not yet running). */
export async function createPod(admin: KubeAdmin, ns: string, app: string, ip: string): Promise<string> {
  const name = podName(app, ip);
  await admin.apply({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: { app } },
    spec: {
      nodeName: NODE,
      containers: [{ name: 'app', image: 'app:1', ports: [{ name: 'http', containerPort: 8080 }] }],
    },
  });
  return name;
}

/** The kubelet's status report: running with `ip`, Ready as given. */
export async function setPodStatus(
  admin: KubeAdmin,
  ns: string,
  name: string,
  ip: string,
  ready: boolean,
): Promise<void> {
  const now = new Date().toISOString();
  const cond = (type: string, status: boolean): Record<string, string> => ({
    type,
    status: status ? 'True' : 'False',
    lastTransitionTime: now,
  });
  await admin.request(
    'PATCH',
    `/api/v1/namespaces/${ns}/pods/${name}/status`,
    {
      status: {
        phase: 'Running',
        hostIP: '10.255.0.1',
        hostIPs: [{ ip: '10.255.0.1' }],
        podIP: ip,
        podIPs: [{ ip }],
        conditions: [
          cond('PodScheduled', true),
          cond('Initialized', true),
          cond('ContainersReady', ready),
          cond('Ready', ready),
        ],
      },
    },
    'application/merge-patch+json',
  );
}

/** A pod of `app` running at `ip` and Ready. */
export async function startPod(admin: KubeAdmin, ns: string, app: string, ip: string): Promise<void> {
  const name = await createPod(admin, ns, app, ip);
  await setPodStatus(admin, ns, name, ip, true);
}

/**
 * Deletes a pod as the API server and kubelet do together: the graceful delete marks it
 * terminating (the EndpointSlice controller reports it not ready, serving, terminating), then the
 * kubelet, once the containers are gone, removes it for good (grace period 0).
 */
export async function stopPod(
  admin: KubeAdmin,
  ns: string,
  name: string,
  opts: { terminatingMs?: number } = {},
): Promise<void> {
  const path = `/api/v1/namespaces/${ns}/pods/${name}`;
  const terminatingMs = opts.terminatingMs ?? 0;
  if (terminatingMs > 0) {
    await admin.request('DELETE', path, { apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 30 });
    await new Promise((r) => setTimeout(r, terminatingMs));
  }
  await admin
    .request('DELETE', path, { apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 0 })
    .catch((e: unknown) => {
      if (!(e instanceof KubeError && e.status === 404)) throw e;
    });
}
