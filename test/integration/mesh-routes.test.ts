// The sidecar's HTTPRoutes (GAMMA: parentRef a Service, `--mesh-routes true`) against the real API
// server with the published Gateway API CRDs, the sidecar's own ClusterRole and a TokenRequest
// token, backends on pod IPs inside a network namespace, calls through the explicit egress:
//   1. a 1:1 weighted split, Exact before PathPrefix, a header match and a prefix rewrite apply to
//      the app's calls to the Service; a Service without a route is called as before;
//   2. the API server stopped: every route still applies (last-known-good), also from a sidecar
//      restarted during the outage (its snapshot);
//   3. the API server back: a route change is applied.
// And without the CRDs: the sidecar is ready and serves, and applies routes once they are installed.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { podEnv, type PodEnv } from '../harness/data-path.ts';
import { createService, createSlice, waitFor } from '../harness/discovery.ts';
import { startCluster } from '../harness/cluster.ts';
import {
  backendTo,
  canaryRules,
  gatewayApiCluster,
  httpRoute,
  installGatewayApi,
} from '../harness/gateway-api.ts';
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

test("HTTPRoutes attached to a Service apply to the app's calls, through an API outage and after", async (t) => {
  const env = await gatewayApiCluster(t, 'gamma');
  if (!env) return;
  const { cluster, ns } = env;
  const admin = cluster.admin;
  const pod = await podEnv(cluster, ns);
  t.after(() => pod.close());
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
      await waitFor('snapshot written', () => existsSync(pod.snapshot), 15_000);
      await delay(2_500); // the debounced writer has caught up with the last change
      await cluster.apiserverStop();
      await routesApplied(pod, ns);
      await sidecar.stop('SIGTERM');
      sidecar = await pod.startSidecar(['--mesh-routes', 'true']);
      await waitFor(
        'restarted sidecar ready',
        async () => (await pod.admin('/readyz')).status === 200,
        30_000,
      );
      const status = JSON.parse((await pod.admin('/debug/routes')).body) as {
        httpRoutes: number;
        stale: unknown[];
      };
      assert.equal(status.httpRoutes, 1, 'the route from the snapshot');
      assert.ok(status.stale.length > 0, 'served as stale during the outage');
      await routesApplied(pod, ns);
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
    ['httproutes'],
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
