// Gateway API in the test cluster: the standard channel's CRDs as sigs.k8s.io/gateway-api publishes
// them (fetched by `scripts/test-cluster build`), the gateway's opt-in RBAC and GatewayClass from
// manifests/gateway/gateway-api.yaml, and the objects the tests route by.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { TestContext } from 'node:test';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseAllDocuments } from 'yaml';
import { applyGatewayRbac, gatewayManifest, GATEWAY_NAMESPACE } from './gateway.ts';
import type { KubeAdmin } from './kube.ts';
import { startCluster, type TestCluster } from './cluster.ts';
import { requireNetns } from './netns.ts';
import { requireTool, testBinaries } from './tools.ts';

type Obj = Record<string, unknown> & { kind: string; metadata?: { name?: string; namespace?: string } };

export const gatewayApiCrdsDir = (): string => testBinaries()['gateway-api-crds'];

/** Creates every CRD of the standard channel and waits until the API serves them. */
export async function installGatewayApi(admin: KubeAdmin): Promise<void> {
  const dir = gatewayApiCrdsDir();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
    for (const doc of parseAllDocuments(readFileSync(path.join(dir, file), 'utf8'))) {
      const obj = doc.toJS() as Obj | null;
      if (obj?.kind === 'CustomResourceDefinition') await admin.apply(obj);
    }
  }
  for (let i = 0; ; i++) {
    const ok = await admin
      .request('GET', '/apis/gateway.networking.k8s.io/v1/httproutes')
      .then(() => true)
      .catch(() => false);
    if (ok) break;
    if (i > 100) throw new Error('the Gateway API CRDs were not served within 20 s');
    await delay(200);
  }
  // gateway-api.yaml holds a Role in the gateway's namespace (its per-Gateway Services); a
  // cluster with the gateway's RBAC has that namespace already.
  for (const ns of gatewayManifest('namespace.yaml'))
    await admin.apply(ns).catch((e: { status?: number }) => {
      if (e.status !== 409) throw e;
    });
  for (const obj of gatewayManifest('gateway-api.yaml')) await admin.apply(obj);
}

/** A Gateway of class outrigger in the gateway's namespace: one HTTP listener open to every namespace. */
export const edgeGateway = (): Obj => ({
  apiVersion: 'gateway.networking.k8s.io/v1',
  kind: 'Gateway',
  metadata: { name: 'edge', namespace: GATEWAY_NAMESPACE },
  spec: {
    gatewayClassName: 'outrigger',
    listeners: [{ name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } }],
  },
});

export const httpRoute = (ns: string, name: string, spec: Record<string, unknown>): Obj => ({
  apiVersion: 'gateway.networking.k8s.io/v1',
  kind: 'HTTPRoute',
  metadata: { name, namespace: ns },
  spec: { parentRefs: [{ name: 'edge', namespace: GATEWAY_NAMESPACE }], ...spec },
});

/**
 * A gRPC Service on port 80 with one ready endpoint at ip:port, its port named grpc and, with h2c,
 * `appProtocol: kubernetes.io/h2c` (the Gateway API's backend protocol for HTTP/2 with prior knowledge).
 */
export async function grpcService(
  admin: KubeAdmin,
  ns: string,
  name: string,
  ip: string,
  port: number,
  h2c: boolean,
): Promise<void> {
  const appProtocol = h2c ? { appProtocol: 'kubernetes.io/h2c' } : {};
  await admin.apply({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: ns },
    spec: { ports: [{ name: 'grpc', port: 80, protocol: 'TCP', targetPort: port, ...appProtocol }] },
  });
  await admin.apply({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${name}-1`, namespace: ns, labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [ip], conditions: { ready: true } }],
    ports: [{ name: 'grpc', port, protocol: 'TCP', ...appProtocol }],
  });
}

/** A backendRef to port 80 of a Service. */
export const backendTo = (name: string, weight?: number) => ({
  name,
  port: 80,
  ...(weight === undefined ? {} : { weight }),
});

/**
 * The rules both the gateway's and the sidecar's route tests read off real responses: a 1:1 split,
 * `/checkout` (Exact) before it, a header match, and a prefix rewrite of `/legacy` to `/v2`.
 */
export const canaryRules = (stable: string, canary: string, checkoutTo: string): object[] => [
  { backendRefs: [backendTo(stable, 1), backendTo(canary, 1)] },
  { matches: [{ path: { type: 'Exact', value: '/checkout' } }], backendRefs: [backendTo(checkoutTo)] },
  { matches: [{ headers: [{ name: 'x-canary', value: '1' }] }], backendRefs: [backendTo(canary)] },
  {
    matches: [{ path: { type: 'PathPrefix', value: '/legacy' } }],
    filters: [
      { type: 'URLRewrite', urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/v2' } } },
    ],
    backendRefs: [backendTo(stable)],
  },
];

/**
 * A cluster with the Gateway API CRDs and the gateway's RBAC, stopped after the test, and a fresh
 * namespace; undefined when the test skips (no network namespaces, no CRDs built).
 */
export async function gatewayApiCluster(
  t: TestContext,
  prefix: string,
): Promise<{ cluster: TestCluster; ns: string } | undefined> {
  if (!requireNetns(t)) return undefined;
  const crds = existsSync(path.join(gatewayApiCrdsDir(), 'gateway.networking.k8s.io_httproutes.yaml'));
  if (!requireTool(t, crds, 'the Gateway API CRDs', 'run scripts/test-cluster build')) return undefined;
  const cluster = await startCluster(t);
  if (!cluster) return undefined;
  t.after(() => cluster.stop());
  await applyGatewayRbac(cluster.admin);
  await installGatewayApi(cluster.admin);
  return { cluster, ns: await cluster.admin.createNamespace(prefix) };
}
