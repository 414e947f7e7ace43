import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import {
  createServices,
  discoveryCluster,
  endpointsOf,
  freshnessOf,
  key,
  replaceSliceAddresses,
  sidecarIdentity,
  startSidecarDiscovery,
  waitFor,
} from '../harness/discovery.ts';

test("one EndpointSlice watch per namespace: Services joining and leaving the set never drop the others' endpoints", async (t) => {
  const env = await discoveryCluster(t, 'nswatch');
  if (!env) return;
  const { cluster, ns } = env;
  const id = await sidecarIdentity(cluster, ns);
  t.after(() => id.cleanup());
  await createServices(cluster.admin, ns, 6, (i) => [`10.30.${i}.1`, `10.30.${i}.2`]);
  const { discovery } = await startSidecarDiscovery(cluster.server, id.dir);
  t.after(() => discovery.close());
  await waitFor('ready', () => discovery.ready());

  const expected = new Map<number, string[]>();
  const subscribe = async (i: number): Promise<void> => {
    await waitFor(
      `svc-${i} fresh`,
      async () => freshnessOf(await discovery.resolve(key(ns, `svc-${i}`))) === 'fresh',
    );
    expected.set(i, [`10.30.${i}.1`, `10.30.${i}.2`]);
  };
  await subscribe(0);
  await subscribe(1);

  // Every 10 ms, every Service already in the set must answer its endpoints, whatever the set does.
  let checks = 0;
  let violation: string | undefined;
  let checking = true;
  const checker = (async () => {
    while (checking) {
      for (const [i, want] of expected) {
        const got = endpointsOf(discovery.peek(key(ns, `svc-${i}`)));
        if (got.join() !== want.join()) violation ??= `svc-${i}: ${got.join()} instead of ${want.join()}`;
      }
      checks++;
      await delay(10);
    }
  })();
  t.after(() => (checking = false));

  // Services join one at a time (each a wider selector: a list from the last RV, then a watch).
  for (const i of [2, 3, 4]) await subscribe(i);
  // The cluster-wide Service watch + ONE slice watch for the namespace (not one per Service).
  await waitFor('both watches established', () => discovery.status().watches === 2);
  assert.equal(discovery.status().subscriptions, 5);

  // A change to a Service that was in the set all along still arrives after the set changes.
  // Out of the checked set before the write: its watch event may arrive before the write returns.
  expected.delete(1);
  await replaceSliceAddresses(cluster.admin, ns, 'svc-1-a', ['10.31.0.1']);
  await waitFor('svc-1 change', () => endpointsOf(discovery.peek(key(ns, 'svc-1'))).join() === '10.31.0.1');
  expected.set(1, ['10.31.0.1']);

  // svc-3 leaves the set (its Service is deleted): a narrower watch from the last RV.
  expected.delete(3);
  await cluster.admin.delete('Service', 'svc-3', ns);
  await waitFor('svc-3 absent', () => discovery.peek(key(ns, 'svc-3')).kind === 'absent');
  await subscribe(5);
  expected.delete(4);
  await replaceSliceAddresses(cluster.admin, ns, 'svc-4-a', ['10.31.0.4']);
  await waitFor('svc-4 change', () => endpointsOf(discovery.peek(key(ns, 'svc-4'))).join() === '10.31.0.4');
  expected.set(4, ['10.31.0.4']);
  await delay(200);

  checking = false;
  await checker;
  t.diagnostic(`${checks} checks of every subscribed Service while the set changed 5 times`);
  assert.equal(violation, undefined);
  assert.ok(checks > 20, 'the checker ran throughout');
  for (const [i, want] of expected) {
    const r = discovery.peek(key(ns, `svc-${i}`));
    assert.deepEqual(endpointsOf(r), want, `svc-${i}`);
    assert.equal(freshnessOf(r), 'fresh', `svc-${i}`);
  }
  await waitFor('both watches established', () => discovery.status().watches === 2);
});
