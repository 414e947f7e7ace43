import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startCluster } from '../harness/cluster.ts';
import { startFaultProxy } from '../harness/fault-proxy.ts';
import { KubeAdmin, KubeError } from '../harness/kube.ts';
import { openWatch } from '../harness/watch.ts';

test(
  'the fault proxy injects each fault mode in front of the real API server',
  { timeout: 180_000 },
  async (t) => {
    const cluster = await startCluster(t);
    if (!cluster) return;
    t.after(() => cluster.stop());
    const proxy = await startFaultProxy({ target: cluster });
    t.after(() => proxy.stop());
    const via = new KubeAdmin(proxy.url, cluster.caPem, cluster.adminToken);
    const ns = await cluster.admin.createNamespace('faults');
    const services = `/api/v1/namespaces/${ns}/services`;
    const slices = `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;

    await t.test('passes requests through with real authentication', async () => {
      await via.request('GET', services);
      await assert.rejects(
        via.as('bogus').request('GET', services),
        (e: unknown) => e instanceof KubeError && e.status === 401,
      );
    });

    for (const code of [500, 429, 410] as const) {
      await t.test(`answers ${code} with a Status body on matching paths only`, async () => {
        proxy.rules.push({ match: /endpointslices/, action: code, remaining: 1 });
        await assert.rejects(via.request('GET', slices), (e: unknown) => {
          assert.ok(e instanceof KubeError);
          assert.equal(e.status, code);
          assert.equal((e.body as { code: number }).code, code);
          return true;
        });
        await via.request('GET', services);
        await via.request('GET', slices); // remaining: 1 was used up
        assert.equal(proxy.rules.length, 0);
      });
    }

    await t.test('resets the connection', async () => {
      proxy.rules.push({ match: /endpointslices/, action: 'reset', remaining: 1 });
      await assert.rejects(via.request('GET', slices), /ECONNRESET|socket hang up/);
    });

    await t.test('stalls a request until released', async () => {
      proxy.rules.push({ match: /endpointslices/, action: 'stall', remaining: 1 });
      const pending = via.request('GET', slices);
      const outcome = await Promise.race([
        pending.then(
          () => 'answered',
          () => 'failed',
        ),
        new Promise((r) => setTimeout(() => r('still pending'), 1_000)),
      ]);
      assert.equal(outcome, 'still pending');
      proxy.releaseStalls();
      await assert.rejects(pending, /socket hang up|ECONNRESET/);
      assert.equal(proxy.counts.faults.get('stall'), 1);
    });

    await t.test('ends a watch with a 410 Expired event', async () => {
      proxy.rules.push({ match: /services\?.*watch=true/, action: 'gone-event', remaining: 1 });
      const w = openWatch(proxy.url, cluster.caPem, cluster.adminToken, `${services}?watch=true`);
      const e = await w.next((ev) => ev.type === 'ERROR');
      assert.equal(e.object.code, 410);
      assert.equal(await w.ended, 'end');
    });

    await t.test('counts requests and open watches, and can cut them', async () => {
      const before = proxy.counts.byPath.get(`GET ${services}`) ?? 0;
      await via.request('GET', services);
      assert.equal(proxy.counts.byPath.get(`GET ${services}`), before + 1);
      const a = openWatch(proxy.url, cluster.caPem, cluster.adminToken, `${services}?watch=true`);
      const b = openWatch(proxy.url, cluster.caPem, cluster.adminToken, `${slices}?watch=1`);
      await Promise.all([a.status, b.status]);
      assert.equal(proxy.openWatches(), 2);
      assert.deepEqual(proxy.openWatchPaths().sort(), [services, slices].sort());
      proxy.dropWatches();
      await Promise.all([a.ended, b.ended]);
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(proxy.openWatches(), 0);
    });
  },
);
