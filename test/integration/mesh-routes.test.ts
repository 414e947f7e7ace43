// The sidecar's HTTPRoutes (GAMMA: parentRef a Service, `--mesh-routes true`) against the real API
// server with the published Gateway API CRDs, the sidecar's own ClusterRole and a TokenRequest
// token, backends on pod IPs inside a network namespace, calls through the explicit egress:
//   1. a 1:1 weighted split, Exact before PathPrefix, a header match and a prefix rewrite apply to
//      the app's calls to the Service; a Service without a route is called as before;
//   2. the API server stopped: every route still applies (last-known-good), also from a sidecar
//      restarted during the outage (its snapshot);
//   3. the API server back: a route change is applied.
// GRPCRoutes alike, on real grpc-js calls (prior-knowledge h2c through the egress): a method match
// with a header before a service match's 1:1 split, an HTTPRoute on the same port not applied,
// UNIMPLEMENTED for an unmatched method; all of it with the API server stopped and from a sidecar
// restarted then.
// And without the CRDs: the sidecar is ready and serves, and applies routes once they are installed.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test, type TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { podEnv, type PodEnv, type Sidecar } from '../harness/data-path.ts';
import { createService, createSlice, sliceObject, waitFor } from '../harness/discovery.ts';
import { startCluster } from '../harness/cluster.ts';
import {
  backendTo,
  canaryRules,
  gatewayApiCluster,
  httpRoute,
  installGatewayApi,
} from '../harness/gateway-api.ts';
import type { TestCluster } from '../harness/cluster.ts';
import { requireNetns } from '../harness/netns.ts';

const V1 = '10.244.0.61';
const V2 = '10.244.0.62';
const OTHER = '10.244.0.63';

const webRoute = (ns: string, checkoutTo = 'web-v2') =>
  httpRoute(ns, 'web-split', {
    parentRefs: [{ group: '', kind: 'Service', name: 'web', port: 80 }],
    rules: canaryRules('web', 'web-v2', checkoutTo),
  });

/** Every rule read off real responses through the sidecar. */
async function routesApplied(pod: PodEnv, ns: string, checkoutTo = V2): Promise<void> {
  const web = `http://web.${ns}`;
  const seen = new Set<string>();
  for (let i = 0; i < 40 && seen.size < 2; i++) seen.add((await pod.get(`${web}/`)).body);
  assert.deepEqual([...seen].sort(), [V1, V2], 'both Services of the 1:1 split answer');
  for (let i = 0; i < 5; i++)
    assert.equal((await pod.get(`${web}/checkout`)).body, checkoutTo, 'Exact before the / prefix');
  assert.equal((await pod.get(`${web}/anything`, { 'x-canary': '1' })).body, V2);
  const rewritten = await pod.get(`${web}/legacy/item?x=1`);
  assert.deepEqual([rewritten.body, rewritten.path], [V1, '/v2/item?x=1']);
  for (let i = 0; i < 5; i++)
    assert.equal((await pod.get(`http://other.${ns}/`)).body, OTHER, 'no route: the Service as it is');
}

/** A cluster with the Gateway API CRDs, a fresh namespace and a pod there; undefined on a skip. */
async function meshPod(
  t: TestContext,
  prefix: string,
): Promise<{ cluster: TestCluster; ns: string; pod: PodEnv } | undefined> {
  const env = await gatewayApiCluster(t, prefix);
  if (!env) return undefined;
  const pod = await podEnv(env.cluster, env.ns);
  t.after(() => pod.close());
  return { ...env, pod };
}

/** /debug/routes of the sidecar. */
async function routesStatus(
  pod: PodEnv,
): Promise<{ httpRoutes: number; grpcRoutes: number; stale: { collection: string }[] }> {
  return JSON.parse((await pod.admin('/debug/routes')).body) as Awaited<ReturnType<typeof routesStatus>>;
}

/**
 * Stops the API server once the sidecar's snapshot holds its routes; `applied` must pass then, and
 * again from the sidecar restarted during the outage, whose routes are served stale. Returns the
 * restarted sidecar; the API server stays stopped.
 */
async function throughOutage(
  cluster: TestCluster,
  pod: PodEnv,
  sidecar: Sidecar,
  applied: () => Promise<void>,
): Promise<Sidecar> {
  await waitFor('snapshot written', () => existsSync(pod.snapshot), 15_000);
  await delay(2_500); // the debounced writer has caught up with the last change
  await cluster.apiserverStop();
  await applied();
  await sidecar.stop('SIGTERM');
  const restarted = await pod.startSidecar(['--mesh-routes', 'true']);
  await waitFor('restarted sidecar ready', async () => (await pod.admin('/readyz')).status === 200, 30_000);
  assert.ok((await routesStatus(pod)).stale.length > 0, 'served as stale during the outage');
  await applied();
  return restarted;
}

test("HTTPRoutes attached to a Service apply to the app's calls, through an API outage and after", async (t) => {
  const env = await meshPod(t, 'gamma');
  if (!env) return;
  const { cluster, ns, pod } = env;
  const admin = cluster.admin;
  for (const [name, ip] of [
    ['web', V1],
    ['web-v2', V2],
    ['other', OTHER],
  ] as const) {
    await createService(admin, ns, name);
    await createSlice(admin, ns, name, `${name}-a`, [ip]);
    await pod.startBackend(ip);
  }
  await admin.apply(webRoute(ns));
  let sidecar = await pod.startSidecar(['--mesh-routes', 'true']);
  t.after(() => sidecar.stop('SIGKILL'));
  await waitFor('sidecar ready', async () => (await pod.admin('/readyz')).status === 200, 30_000);
  await waitFor(
    'the route applied',
    async () => (await pod.get(`http://web.${ns}/checkout`)).body === V2,
    30_000,
  );

  await t.test('weights, precedence, a header match and a rewrite; no route, no change', async () => {
    await routesApplied(pod, ns);
    const status = JSON.parse((await pod.admin('/debug/routes')).body) as {
      httpRoutes: number;
      services: number;
    };
    assert.deepEqual([status.httpRoutes, status.services], [1, 1]);
  });

  await t.test(
    'the API server stopped: every route still applies, also from a sidecar restarted during the outage',
    async () => {
      sidecar = await throughOutage(cluster, pod, sidecar, () => routesApplied(pod, ns));
      assert.equal((await routesStatus(pod)).httpRoutes, 1, 'the route from the snapshot');
    },
  );

  await t.test('the API server back: a route change is applied', async () => {
    await cluster.apiserverStart();
    await admin.request('PUT', `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/httproutes/web-split`, {
      ...webRoute(ns, 'web'),
      metadata: (await admin.get<{ metadata: unknown }>('HTTPRoute', 'web-split', ns)).metadata,
    });
    await waitFor(
      'the change applied',
      async () => (await pod.get(`http://web.${ns}/checkout`)).body === V1,
      30_000,
    );
    await routesApplied(pod, ns, V1);
  });
});

const RPC = { a: '10.244.0.71', b: '10.244.0.72', c: '10.244.0.73' };
const RPC_PORT = 9000;

/** A Service whose port 9000 has one gRPC backend; no appProtocol, as the conformance suite's. */
async function grpcService(admin: TestCluster['admin'], ns: string, name: string, ip: string): Promise<void> {
  const port = { name: 'grpc', port: RPC_PORT, protocol: 'TCP' };
  await admin.apply({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: ns },
    spec: { ports: [{ ...port, targetPort: RPC_PORT }] },
  });
  await admin.apply({ ...sliceObject(ns, name, `${name}-a`, [ip]), ports: [port] });
}

const rpcTo = (name: string, weight = 1) => ({ name, port: RPC_PORT, weight });

/** Every GRPCRoute rule read off real grpc-js calls through the sidecar. */
async function grpcRoutesApplied(pod: PodEnv, ns: string): Promise<void> {
  const target = `rpc.${ns}:${RPC_PORT}`;
  const split = await pod.grpcCalls(target, 60);
  assert.equal(split.failed, 0, JSON.stringify(split.failures));
  assert.deepEqual(Object.keys(split.byServer).sort(), [`${RPC.a}:${RPC_PORT}`, `${RPC.b}:${RPC_PORT}`]);
  for (const n of Object.values(split.byServer))
    assert.ok(n >= 10, `a 1:1 split: ${JSON.stringify(split.byServer)}`);
  const canary = await pod.grpcCalls(target, 10, { 'x-canary': '1' });
  assert.deepEqual(canary.byServer, { [`${RPC.c}:${RPC_PORT}`]: 10 }, 'service+method and a header first');
  assert.deepEqual(await pod.grpcCall(target, '/grpc.health.v1.Health/Check'), {
    grpcStatus: '12',
    error: 'no_route',
  });
}

test("GRPCRoutes attached to a Service apply to the app's gRPC calls, before its HTTPRoutes, through an API outage", async (t) => {
  const env = await meshPod(t, 'gamma-grpc');
  if (!env) return;
  const { cluster, ns, pod } = env;
  const admin = cluster.admin;
  for (const [name, ip] of [
    ['rpc', RPC.a],
    ['rpc-a', RPC.a],
    ['rpc-b', RPC.b],
    ['rpc-c', RPC.c],
  ] as const)
    await grpcService(admin, ns, name, ip);
  for (const ip of Object.values(RPC)) await pod.startGrpcBackend(ip, RPC_PORT);
  const parentRefs = [{ group: '', kind: 'Service', name: 'rpc', port: RPC_PORT }];
  await admin.apply({
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'GRPCRoute',
    metadata: { name: 'rpc-split', namespace: ns },
    spec: {
      parentRefs,
      rules: [
        {
          matches: [{ method: { service: 'outrigger.v1.TestService' } }],
          backendRefs: [rpcTo('rpc-a'), rpcTo('rpc-b')],
        },
        {
          matches: [
            {
              method: { service: 'outrigger.v1.TestService', method: 'Unary' },
              headers: [{ name: 'x-canary', value: '1' }],
            },
          ],
          backendRefs: [rpcTo('rpc-c')],
        },
      ],
    },
  });
  // On the same Service port: GRPCRoutes are applied there, never this.
  await admin.apply(httpRoute(ns, 'rpc-http', { parentRefs, rules: [{ backendRefs: [rpcTo('rpc-c')] }] }));
  let sidecar = await pod.startSidecar(['--mesh-routes', 'true']);
  t.after(() => sidecar.stop('SIGKILL'));
  await waitFor('sidecar ready', async () => (await pod.admin('/readyz')).status === 200, 30_000);
  await waitFor(
    'the route applied',
    async () =>
      (await pod.grpcCall(`rpc.${ns}:${RPC_PORT}`, '/grpc.health.v1.Health/Check')).error === 'no_route',
    30_000,
  );

  await t.test('a 1:1 split, a method and header match before it, none matching UNIMPLEMENTED', async () => {
    await grpcRoutesApplied(pod, ns);
    const status = await routesStatus(pod);
    assert.deepEqual([status.grpcRoutes, status.httpRoutes, status.stale], [1, 1, []]);
  });

  await t.test(
    'the API server stopped: the routes still apply, also from a sidecar restarted then',
    async () => {
      sidecar = await throughOutage(cluster, pod, sidecar, () => grpcRoutesApplied(pod, ns));
      assert.equal((await routesStatus(pod)).grpcRoutes, 1, 'the GRPCRoute from the snapshot');
    },
  );
});

test('without the Gateway API CRDs a sidecar with mesh routes is ready and calls Services as before; the CRDs installed later, routes apply', async (t) => {
  if (!requireNetns(t)) return;
  const cluster = await startCluster(t);
  if (!cluster) return;
  t.after(() => cluster.stop());
  const admin = cluster.admin;
  const ns = await admin.createNamespace('gamma-nocrd');
  const pod = await podEnv(cluster, ns);
  t.after(() => pod.close());
  for (const [name, ip] of [
    ['web', V1],
    ['web-v2', V2],
  ] as const) {
    await createService(admin, ns, name);
    await createSlice(admin, ns, name, `${name}-a`, [ip]);
    await pod.startBackend(ip);
  }
  const sidecar = await pod.startSidecar(['--mesh-routes', 'true']);
  t.after(() => sidecar.stop('SIGKILL'));
  await waitFor('sidecar ready', async () => (await pod.admin('/readyz')).status === 200, 30_000);
  for (let i = 0; i < 5; i++) assert.equal((await pod.get(`http://web.${ns}/`)).body, V1);
  const status = JSON.parse((await pod.admin('/debug/routes')).body) as {
    listed: boolean;
    stale: { collection: string }[];
  };
  assert.equal(status.listed, false, 'no HTTPRoute collection to list');
  assert.deepEqual(
    status.stale.map((s) => s.collection),
    ['httproutes', 'grpcroutes'],
  );

  await installGatewayApi(admin);
  await admin.apply(
    httpRoute(ns, 'to-v2', {
      parentRefs: [{ group: '', kind: 'Service', name: 'web', port: 80 }],
      rules: [{ backendRefs: [backendTo('web-v2')] }],
    }),
  );
  // The list is retried with a backoff of at most 30 s.
  await waitFor('the route applied', async () => (await pod.get(`http://web.${ns}/`)).body === V2, 60_000);
  assert.equal((await pod.admin('/readyz')).status, 200);
});
