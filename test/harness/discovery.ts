import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { createDiscovery, type Discovery, type DiscoveryDeps } from '../../src/discovery/index.ts';
import type { Resolution, ServiceKey } from '../../src/discovery/types.ts';
import { systemClock, systemRandom } from '../../src/shared/clock.ts';
import { memoryLogger } from './memory-logger.ts';
import type { TestContext } from 'node:test';
import { startCluster, type TestCluster } from './cluster.ts';
import { startFaultProxy, type FaultProxy } from './fault-proxy.ts';
import type { KubeAdmin } from './kube.ts';
import { writeTokenDir } from './token-dir.ts';
import { harnessSlices, type EndpointProducer } from './endpoint-producers.ts';

/**
 * Discovery-specific helpers for integration tests: Services and EndpointSlices as the API
 * server stores them, and a sidecar's discovery wired exactly as `outrigger proxy` wires it
 * (in-cluster mode: projected token directory + KUBERNETES_SERVICE_HOST/PORT).
 * Endpoint addresses are data only: nothing ever connects to them.
 */
export async function createService(admin: KubeAdmin, ns: string, name: string): Promise<void> {
  await admin.apply({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: ns },
    spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }] },
  });
}

export const sliceObject = (ns: string, svc: string, slice: string, addresses: string[]) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name: slice, namespace: ns, labels: { 'kubernetes.io/service-name': svc } },
  addressType: 'IPv4',
  endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
  ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
});

export async function createSlice(
  admin: KubeAdmin,
  ns: string,
  svc: string,
  slice: string,
  addresses: string[],
): Promise<void> {
  await admin.apply(sliceObject(ns, svc, slice, addresses));
}

export async function replaceSliceAddresses(
  admin: KubeAdmin,
  ns: string,
  slice: string,
  addresses: string[],
): Promise<void> {
  await admin.patch('EndpointSlice', slice, ns, {
    endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
  });
}

/** A ServiceAccount bound to the sidecar ClusterRole, a TokenRequest token, a kubelet-style dir. */
export async function sidecarIdentity(
  cluster: TestCluster,
  ns: string,
  opts: { boundSecretName?: string } = {},
): Promise<{ dir: string; token: string; cleanup(): void }> {
  const sa = 'sidecar';
  await cluster.admin.createServiceAccount(ns, sa).catch(() => undefined);
  await cluster.admin.bindSidecarRole(ns, sa).catch(() => undefined);
  const token = await cluster.admin.mintToken(ns, sa, opts);
  const dir = join(mkdtempSync(join(tmpdir(), 'outrigger-sa-')), 'serviceaccount');
  writeTokenDir(dir, { token, caPem: cluster.caPem, namespace: ns });
  return { dir, token, cleanup: () => rmSync(join(dir, '..'), { recursive: true, force: true }) };
}

export interface SidecarDiscovery {
  discovery: Discovery;
  log: ReturnType<typeof memoryLogger>;
}

/** Discovery as the sidecar runs it, against `server` (the API server or a fault proxy). */
export async function startSidecarDiscovery(
  server: string,
  tokenDir: string,
  opts: {
    maxWatches?: number;
    snapshot?: string;
    capture?: 'transparent' | 'explicit';
    tuning?: DiscoveryDeps['tuning'];
  } = {},
): Promise<SidecarDiscovery> {
  const url = new URL(server);
  const log = memoryLogger('info');
  const discovery = await createDiscovery(
    {
      source: { kind: 'kube' },
      kubeconfig: undefined,
      tokenDir,
      namespace: undefined,
      capture: opts.capture ?? 'transparent',
      maxWatches: opts.maxWatches ?? 500,
      snapshot: opts.snapshot,
    },
    {
      clock: systemClock,
      random: systemRandom,
      logger: log,
      env: { KUBERNETES_SERVICE_HOST: url.hostname, KUBERNETES_SERVICE_PORT: url.port },
      tuning: { snapshotDebounceMs: 200, ...opts.tuning },
    },
  );
  return { discovery, log };
}

export const endpointsOf = (r: Resolution): string[] =>
  r.kind === 'found' ? (r.service.endpoints.get('http') ?? []).map((e) => e.address).sort() : [];

export const freshnessOf = (r: Resolution): string => (r.kind === 'found' ? r.freshness.state : r.kind);

/** Polls cond every 50 ms until it holds; returns the elapsed ms, or throws after limitMs. */
export async function waitFor(
  what: string,
  cond: () => boolean | Promise<boolean>,
  limitMs = 20_000,
): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await cond()) return Date.now() - start;
    if (Date.now() - start > limitMs) throw new Error(`timed out after ${limitMs} ms waiting for ${what}`);
    await delay(50);
  }
}

export const key = (namespace: string, name: string): ServiceKey => ({ namespace, name });

/**
 * A real cluster for one test (stopped after it, pass or fail) and a fresh namespace in it, ready
 * for `producer` to write endpoints (with it, kube-controller-manager for the controller).
 */
export async function discoveryCluster(
  t: TestContext,
  prefix: string,
  producer: EndpointProducer = harnessSlices,
): Promise<{ cluster: TestCluster; ns: string } | undefined> {
  const cluster = await startCluster(t, producer.clusterOptions);
  if (!cluster) return undefined;
  t.after(() => cluster.stop());
  await producer.prepare(cluster.admin);
  return { cluster, ns: await cluster.admin.createNamespace(prefix) };
}

/** The fault proxy in front of the cluster, stopped after the test. */
export async function withFaultProxy(t: TestContext, cluster: TestCluster): Promise<FaultProxy> {
  const proxy = await startFaultProxy({ target: cluster });
  t.after(() => proxy.stop());
  return proxy;
}

/** Services svc-0..svc-(n-1) whose endpoints are addresses(i), written by `producer`, 10 at a time. */
export async function createServices(
  admin: KubeAdmin,
  ns: string,
  n: number,
  addresses: (i: number) => string[],
  producer: EndpointProducer = harnessSlices,
): Promise<void> {
  for (let from = 0; from < n; from += 10) {
    const batch = Array.from({ length: Math.min(10, n - from) }, (_, k) => from + k);
    await Promise.all(batch.map((i) => producer.createService(admin, ns, `svc-${i}`, addresses(i))));
  }
}
