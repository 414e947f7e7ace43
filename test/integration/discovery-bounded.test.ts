import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import {
  createService,
  createSlice,
  discoveryCluster,
  endpointsOf,
  key,
  sidecarIdentity,
  startSidecarDiscovery,
  withFaultProxy,
} from '../harness/discovery.ts';

const N = 5;

test('the LRU caps live watches at N with 3N Services looked up; evicted ones resolve from the cold tier in an outage', async (t) => {
  const env = await discoveryCluster(t, 'bounded');
  if (!env) return;
  const { cluster, ns } = env;
  const proxy = await withFaultProxy(t, cluster);
  const id = await sidecarIdentity(cluster, ns);
  t.after(() => id.cleanup());
  // One Service per namespace: the Services of a namespace share one slice watch, so this is
  // where each subscription costs a watch of its own.
  const nsOf: string[] = [];
  for (let i = 0; i < 3 * N; i++) {
    const other = i === 0 ? ns : await cluster.admin.createNamespace('bounded');
    nsOf.push(other);
    await createService(cluster.admin, other, `svc-${i}`);
    await createSlice(cluster.admin, other, `svc-${i}`, `svc-${i}-a`, [`10.60.${i}.1`]);
  }
  const { discovery } = await startSidecarDiscovery(proxy.url, id.dir, { maxWatches: N });
  t.after(() => discovery.close());

  const sliceWatches = (): number =>
    proxy.openWatchPaths().filter((p) => p.endsWith('/endpointslices')).length;
  let maxSeen = 0;
  for (let i = 0; i < 3 * N; i++) {
    assert.deepEqual(endpointsOf(await discovery.resolve(key(nsOf[i] ?? ns, `svc-${i}`))), [`10.60.${i}.1`]);
    await delay(100);
    maxSeen = Math.max(maxSeen, sliceWatches());
    assert.ok(sliceWatches() <= N, `${sliceWatches()} EndpointSlice watches open after ${i + 1} lookups`);
    assert.ok(proxy.openWatches() <= N + 1, 'plus the one cluster-wide Service watch');
  }
  assert.equal(maxSeen, N);
  assert.equal(discovery.status().subscriptions, N);
  assert.equal(discovery.status().counters?.coldServices, 2 * N);

  await cluster.apiserverStop();
  for (let i = 0; i < 3 * N; i++) {
    const r = await discovery.resolve(key(nsOf[i] ?? ns, `svc-${i}`), { waitMs: 0 });
    assert.deepEqual(endpointsOf(r), [`10.60.${i}.1`], `svc-${i} during the outage`);
  }
  t.diagnostic(`at most ${maxSeen} EndpointSlice watches for ${3 * N} Services (LRU ${N})`);
});
