// `outrigger gateway --gateway-api` against the real API server with the published Gateway API
// CRDs (standard channel, v1.6), the gateway's ServiceAccount and the RBAC manifests/gateway ships,
// the fault proxy in front of the API, and backends on pod IPs inside a network namespace:
//   1. HTTPRoute weights, Exact before PathPrefix, a header match, a prefix rewrite and a redirect
//      are served; the status the spec asks for is written (GatewayClass, Gateway, HTTPRoute);
//   2. 500s, resets and stalls on the Gateway API lists during relists forced by 410s: no route
//      removed, no failed request;
//   3. the API server stopped: the same checks pass, also from a gateway restarted during the
//      outage (its snapshot);
//   4. the API server back: a route change is applied.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { createService, createSlice, waitFor } from '../harness/discovery.ts';
import { startFaultProxy } from '../harness/fault-proxy.ts';
import { gatewayPod, gatewayStatus, relistFaults, type GatewayPod } from '../harness/gateway.ts';
import { backendTo, canaryRules, edgeGateway, gatewayApiCluster, httpRoute } from '../harness/gateway-api.ts';

const STABLE = '10.244.0.101';
const CANARY = '10.244.0.102';
const HOST = 'http://shop.example.com';
const shopRoute = (ns: string, exactTo = 'canary') =>
  httpRoute(ns, 'shop', {
    hostnames: ['shop.example.com'],
    rules: [
      ...canaryRules('stable', 'canary', exactTo),
      {
        matches: [{ path: { type: 'Exact', value: '/old' } }],
        filters: [
          {
            type: 'RequestRedirect',
            requestRedirect: { path: { type: 'ReplaceFullPath', replaceFullPath: '/new' }, statusCode: 301 },
          },
        ],
      },
    ],
  });

/** Weights, precedence, a header match, a rewrite and a redirect, each read off real responses. */
async function routesServed(pod: GatewayPod, exactTo = CANARY): Promise<void> {
  const seen = new Set<string>();
  for (let i = 0; i < 40 && seen.size < 2; i++) seen.add((await pod.get(`${HOST}/`)).body);
  assert.deepEqual([...seen].sort(), [STABLE, CANARY], 'both backends of a 1:1 split answer');
  for (let i = 0; i < 5; i++)
    assert.equal((await pod.get(`${HOST}/checkout`)).body, exactTo, 'Exact before the / prefix');
  assert.equal((await pod.get(`${HOST}/anything`, undefined, { 'x-canary': '1' })).body, CANARY);
  const rewritten = await pod.get(`${HOST}/legacy/item?x=1`);
  assert.deepEqual([rewritten.body, rewritten.path], [STABLE, '/v2/item?x=1']);
  const moved = await pod.get(`${HOST}/old`);
  assert.deepEqual([moved.status, moved.location], [301, 'http://shop.example.com/new']);
}

test('gateway API: routes served and their status written; faults, outage and restart keep them', async (t) => {
  const env = await gatewayApiCluster(t, 'gwapi');
  if (!env) return;
  const { cluster, ns } = env;
  const admin = cluster.admin;
  for (const [name, ip] of [
    ['stable', STABLE],
    ['canary', CANARY],
  ] as const) {
    await createService(admin, ns, name);
    await createSlice(admin, ns, name, `${name}-a`, [ip]);
  }
  await admin.apply(edgeGateway());
  await admin.apply(shopRoute(ns));
  await admin.apply(
    httpRoute(ns, 'cross', {
      hostnames: ['cross.example.com'],
      rules: [{ backendRefs: [{ ...backendTo('stable'), namespace: 'default' }] }],
    }),
  );

  const proxy = await startFaultProxy({ target: cluster });
  t.after(() => proxy.stop());
  const pod = await gatewayPod(cluster, proxy.url);
  t.after(() => pod.close());
  for (const a of [STABLE, CANARY]) await pod.startBackend(a);
  let gateway = await pod.startGateway(['--gateway-api', 'true']);
  t.after(() => gateway.stop('SIGKILL'));
  await waitFor('gateway ready', async () => (await pod.admin('/readyz')).status === 200, 30_000);

  await t.test('HTTPRoutes served; GatewayClass, Gateway and HTTPRoute status written', async () => {
    await routesServed(pod);
    type Cond = { type: string; status: string; reason: string };
    const cond = (cs: Cond[] | undefined, type: string) => {
      const c = cs?.find((x) => x.type === type);
      return c && `${c.status}/${c.reason}`;
    };
    const parents = async (name: string) =>
      (await admin.get<{ status?: { parents?: { conditions: Cond[] }[] } }>('HTTPRoute', name, ns)).status
        ?.parents ?? [];
    await waitFor('route status written', async () => (await parents('cross')).length > 0, 15_000);
    assert.equal(cond((await parents('shop'))[0]!.conditions, 'Accepted'), 'True/Accepted');
    assert.equal(cond((await parents('shop'))[0]!.conditions, 'ResolvedRefs'), 'True/ResolvedRefs');
    assert.equal(cond((await parents('cross'))[0]!.conditions, 'ResolvedRefs'), 'False/RefNotPermitted');
    const crossed = await pod.get('http://cross.example.com/');
    assert.deepEqual([crossed.status, crossed.error], [500, 'route_backend_invalid']);
    const gw = await admin.get<{ status: { conditions: Cond[]; listeners: { attachedRoutes: number }[] } }>(
      'Gateway',
      'edge',
      'outrigger-gateway',
    );
    assert.equal(cond(gw.status.conditions, 'Programmed'), 'True/Programmed');
    assert.equal(gw.status.listeners[0]!.attachedRoutes, 2);
    const cls = await admin.get<{ status: { conditions: Cond[] } }>('GatewayClass', 'outrigger');
    assert.equal(cond(cls.status.conditions, 'Accepted'), 'True/Accepted');
  });

  await t.test(
    '500s, resets and stalls on the Gateway API lists during relists: no route removed, no request failed',
    async () => {
      const traffic = pod.load(20, 14_000, [`${HOST}/`, `${HOST}/checkout`, `${HOST}/legacy/a`]);
      await relistFaults(
        proxy,
        /\/(gatewayclasses|gateways|httproutes|grpcroutes|referencegrants|services|endpointslices)(\?(?!.*watch=)|$)/,
      );
      const summary = await traffic;
      t.diagnostic(
        `faults: ${JSON.stringify(Object.fromEntries(proxy.counts.faults))}; ${summary.total} requests`,
      );
      assert.ok((proxy.counts.faults.get(500) ?? 0) > 0 && (proxy.counts.faults.get('stall') ?? 0) > 0);
      assert.equal(summary.failed, 0, JSON.stringify(summary.failures.slice(0, 5)));
      await routesServed(pod);
      await waitFor('fresh again', async () => (await gatewayStatus(pod)).stale.length === 0, 30_000);
    },
  );

  await t.test('API server down: routes served, also by a gateway restarted during the outage', async () => {
    await waitFor('snapshot written', () => existsSync(path.join(pod.snapshotDir, 'gateway.snap')), 15_000);
    await delay(2_500); // the debounced writer has caught up with the last change
    await cluster.apiserverStop();
    await routesServed(pod);
    await gateway.stop('SIGTERM');
    gateway = await pod.startGateway(['--gateway-api', 'true']);
    await waitFor('restarted gateway ready', async () => (await pod.admin('/readyz')).status === 200, 30_000);
    assert.ok((await gatewayStatus(pod)).stale.length > 0, 'served as stale during the outage');
    await routesServed(pod);
  });

  await t.test('API server back: a route change is applied', async () => {
    await cluster.apiserverStart();
    await admin.request('PUT', `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/httproutes/shop`, {
      ...shopRoute(ns, 'stable'),
      metadata: (await admin.get<{ metadata: unknown }>('HTTPRoute', 'shop', ns)).metadata,
    });
    await waitFor(
      'the change served',
      async () => (await pod.get(`${HOST}/checkout`)).body === STABLE,
      30_000,
    );
    await routesServed(pod, STABLE);
  });
});
