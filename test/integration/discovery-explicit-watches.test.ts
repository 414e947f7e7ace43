import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createService,
  createSlice,
  discoveryCluster,
  endpointsOf,
  key,
  sidecarIdentity,
  startSidecarDiscovery,
  waitFor,
  withFaultProxy,
} from '../harness/discovery.ts';

const MAX_WATCHES = 5;
const JUNK = 200;
const REAL = 8;

test('explicit mode: random names open no watch, and --max-watches bounds Service and slice watches together', async (t) => {
  const env = await discoveryCluster(t, 'explicit');
  if (!env) return;
  const { cluster, ns } = env;
  const proxy = await withFaultProxy(t, cluster);
  const id = await sidecarIdentity(cluster, ns);
  t.after(() => id.cleanup());
  const namespaces: string[] = [];
  for (let i = 0; i < REAL; i++) {
    const other = await cluster.admin.createNamespace('shop');
    await createService(cluster.admin, other, 'web');
    await createSlice(cluster.admin, other, 'web', 'web-a', [`10.70.${i}.1`]);
    namespaces.push(other);
  }
  const { discovery } = await startSidecarDiscovery(proxy.url, id.dir, {
    maxWatches: MAX_WATCHES,
    capture: 'explicit',
  });
  t.after(() => discovery.close());
  await waitFor('the home namespace watch', () => proxy.openWatches() === 1);

  // An app looking up names such as x.ns-N (or example.com): one LIST each, no watch.
  const before = proxy.counts.total;
  for (let i = 0; i < JUNK; i++) {
    assert.equal((await discovery.resolve(key(`ns-${i}`, 'x'))).kind, 'absent', `x.ns-${i}`);
    assert.equal(proxy.openWatches(), 1, `watches open after x.ns-${i}: ${proxy.openWatchPaths().join(' ')}`);
  }
  const junkRequests = proxy.counts.total - before;
  assert.equal(junkRequests, JUNK, 'one request per name');
  const again = proxy.counts.total;
  for (let i = 0; i < JUNK; i++) assert.equal((await discovery.resolve(key(`ns-${i}`, 'x'))).kind, 'absent');
  assert.equal(proxy.counts.total, again, 'repeated lookups are answered from the negative cache');

  // Real Services in other namespaces: each needs its namespace's Service watch and a slice watch.
  let maxSeen = 0;
  const sampler = setInterval(() => (maxSeen = Math.max(maxSeen, proxy.openWatches())), 5);
  t.after(() => clearInterval(sampler));
  for (let i = 0; i < REAL; i++) {
    assert.deepEqual(endpointsOf(await discovery.resolve(key(namespaces[i] ?? '', 'web'))), [`10.70.${i}.1`]);
    // Evicted watches close asynchronously; the bound must hold once they have.
    await waitFor(
      `at most ${MAX_WATCHES + 1} watches after web.${namespaces[i]}`,
      () => proxy.openWatches() <= MAX_WATCHES + 1,
      10_000,
    );
  }
  clearInterval(sampler);
  // Each Service is alone in its namespace, so each subscription costs two watches.
  assert.equal(discovery.status().subscriptions, Math.floor(MAX_WATCHES / 2));

  await cluster.apiserverStop();
  for (let i = 0; i < REAL; i++) {
    const r = await discovery.resolve(key(namespaces[i] ?? '', 'web'), { waitMs: 0 });
    assert.deepEqual(endpointsOf(r), [`10.70.${i}.1`], `web.${namespaces[i]} during the outage`);
  }
  t.diagnostic(
    `${JUNK} random names: ${junkRequests} requests, 0 watches; ${REAL} Services in ${REAL} namespaces: at most ${maxSeen} watches sampled (--max-watches ${MAX_WATCHES} + the home namespace)`,
  );
});
