// GRPCRoute through `outrigger gateway --gateway-api`, against the real API server with the
// published Gateway API CRDs and the RBAC manifests/gateway ships, grpc-js backends on pod IPs
// inside a network namespace:
//   1. a method match and a header match route calls to two Services, one of which says nothing of
//      HTTP/2 on its port (a GRPCRoute's backend is called over h2c anyway); a call no rule matches
//      is UNIMPLEMENTED; the GRPCRoute's status and the listener's supportedKinds and attachedRoutes
//      are written; an HTTPRoute created later for the same hostname on the same listener is not
//      Accepted, and the GRPCRoute keeps the hostname;
//   2. the API server stopped: the same calls routed, also by a gateway restarted during the outage
//      (its snapshot).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { waitFor } from '../harness/discovery.ts';
import {
  GATEWAY_NAMESPACE,
  GATEWAY_PORTS,
  gatewayPod,
  gatewayStatus,
  type GatewayPod,
} from '../harness/gateway.ts';
import { backendTo, edgeGateway, gatewayApiCluster, grpcService, httpRoute } from '../harness/gateway-api.ts';
import { repoRoot } from '../harness/tools.ts';

const RPC_A = '10.244.0.131';
const RPC_B = '10.244.0.132';
const GRPC_PORT = 9090;
const HOST = 'grpc.example.com';
const SERVICE = 'outrigger.v1.TestService';
const grpcHarness = path.join(repoRoot, 'test/harness/grpc.ts');

interface Calls {
  unary: { servedBy?: string; code: number };
  laneB: { servedBy?: string; code: number };
  unmatched: { code: number };
}

/** Three calls through the gateway's HTTP port: Unary, ServerStream with x-lane b, ServerStream without. */
const calls = `import(${JSON.stringify(grpcHarness)}).then(async ({ clientVia, unary, grpc }) => {
  const c = clientVia(${GATEWAY_PORTS.http}, ${JSON.stringify(HOST)});
  const stream = (md) => new Promise((resolve) => {
    let first;
    const s = c.serverStream({ text: 's', count: 1 }, md);
    s.on('data', (m) => (first ??= m.servedBy));
    s.on('status', (st) => resolve({ servedBy: first, code: st.code }));
    s.on('error', () => {});
  });
  const a = await unary(c, { text: 'hi' });
  const md = new grpc.Metadata(); md.set('x-lane', 'b');
  const b = await stream(md);
  const none = await stream(new grpc.Metadata());
  process.stdout.write(JSON.stringify({
    unary: { servedBy: a.reply?.servedBy, code: a.error?.code ?? 0 },
    laneB: b,
    unmatched: { code: none.code },
  }));
  c.close();
})`;

async function grpcRouted(pod: GatewayPod): Promise<void> {
  const got = await pod.nodeJson<Calls>(calls);
  assert.deepEqual(got.unary, { servedBy: `${RPC_A}:${GRPC_PORT}`, code: 0 }, 'the method match');
  assert.deepEqual(
    got.laneB,
    { servedBy: `${RPC_B}:${GRPC_PORT}`, code: 0 },
    'the header match, over h2c to a port without appProtocol',
  );
  assert.equal(got.unmatched.code, 12, 'no rule matches: UNIMPLEMENTED');
}

type Cond = { type: string; status: string; reason: string };
const cond = (cs: Cond[] | undefined, type: string) => {
  const c = cs?.find((x) => x.type === type);
  return c && `${c.status}/${c.reason}`;
};

test('gateway GRPCRoute: method and header matches over h2c, status, a clashing HTTPRoute, outage and restart', async (t) => {
  const env = await gatewayApiCluster(t, 'gwgrpc');
  if (!env) return;
  const { cluster, ns } = env;
  const admin = cluster.admin;
  await grpcService(admin, ns, 'rpc-a', RPC_A, GRPC_PORT, true);
  await grpcService(admin, ns, 'rpc-b', RPC_B, GRPC_PORT, false);
  await admin.apply(edgeGateway());
  await admin.apply({
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'GRPCRoute',
    metadata: { name: 'rpc', namespace: ns },
    spec: {
      parentRefs: [{ name: 'edge', namespace: GATEWAY_NAMESPACE }],
      hostnames: [HOST],
      rules: [
        { matches: [{ method: { service: SERVICE, method: 'Unary' } }], backendRefs: [backendTo('rpc-a')] },
        { matches: [{ headers: [{ name: 'x-lane', value: 'b' }] }], backendRefs: [backendTo('rpc-b')] },
      ],
    },
  });
  // Named after the GRPCRoute, so it is the younger also when both carry the same second.
  await admin.apply(
    httpRoute(ns, 'web-clash', { hostnames: [HOST], rules: [{ backendRefs: [backendTo('rpc-a')] }] }),
  );

  const pod = await gatewayPod(cluster, cluster.server);
  t.after(() => pod.close());
  await pod.startGrpcBackend(RPC_A, GRPC_PORT);
  await pod.startGrpcBackend(RPC_B, GRPC_PORT);
  let gateway = await pod.startGateway(['--gateway-api', 'true']);
  t.after(() => gateway.stop('SIGKILL'));
  await waitFor('gateway ready', async () => (await pod.admin('/readyz')).status === 200, 30_000);

  await t.test(
    'calls routed by method and header; status written; the younger HTTPRoute not Accepted',
    async () => {
      await grpcRouted(pod);
      const parents = async (kind: 'GRPCRoute' | 'HTTPRoute', name: string) =>
        (await admin.get<{ status?: { parents?: { conditions: Cond[] }[] } }>(kind, name, ns)).status
          ?.parents ?? [];
      await waitFor(
        'route status written',
        async () =>
          (await parents('GRPCRoute', 'rpc')).length > 0 &&
          (await parents('HTTPRoute', 'web-clash')).length > 0,
        15_000,
      );
      const rpc = (await parents('GRPCRoute', 'rpc'))[0]!.conditions;
      assert.deepEqual(
        [cond(rpc, 'Accepted'), cond(rpc, 'ResolvedRefs')],
        ['True/Accepted', 'True/ResolvedRefs'],
      );
      const clash = (await parents('HTTPRoute', 'web-clash'))[0]!.conditions;
      assert.equal(cond(clash, 'Accepted'), 'False/NotAllowedByListeners');
      const gw = await admin.get<{
        status: { listeners: { attachedRoutes: number; supportedKinds: { kind: string }[] }[] };
      }>('Gateway', 'edge', GATEWAY_NAMESPACE);
      const listener = gw.status.listeners[0]!;
      assert.deepEqual(listener.supportedKinds.map((k) => k.kind).sort(), ['GRPCRoute', 'HTTPRoute']);
      assert.equal(listener.attachedRoutes, 1, 'the GRPCRoute only');
      assert.equal((await gatewayStatus(pod)).grpcRoutes, 1);
    },
  );

  await t.test('API server down: calls routed, also by a gateway restarted during the outage', async () => {
    await waitFor('snapshot written', () => existsSync(path.join(pod.snapshotDir, 'gateway.snap')), 15_000);
    await delay(2_500); // the debounced writer has caught up with the last change
    await cluster.apiserverStop();
    await grpcRouted(pod);
    await gateway.stop('SIGTERM');
    gateway = await pod.startGateway(['--gateway-api', 'true']);
    await waitFor('restarted gateway ready', async () => (await pod.admin('/readyz')).status === 200, 30_000);
    assert.ok((await gatewayStatus(pod)).stale.length > 0, 'served as stale during the outage');
    await grpcRouted(pod);
    await cluster.apiserverStart();
  });
});
