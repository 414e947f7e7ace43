import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeKubeApi, status } from '../../harness/fake-kube-api.ts';
import { namesOf, selectorFor } from '../../../src/discovery/namespace-slices.ts';
import { createKubeResolver } from '../../../src/discovery/resolver.ts';
import type { Resolution, ServiceKey } from '../../../src/discovery/types.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const SVC = '/api/v1/services';
const SLICES = '/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices';
const key = (name: string): ServiceKey => ({ namespace: 'shop', name });
const addrs = (r: Resolution): string[] =>
  r.kind === 'found' ? (r.service.endpoints.get('http') ?? []).map((e) => e.address) : [];

function putSlice(api: FakeKubeApi, slice: string, svc: string, addr: string): void {
  api.put(SLICES, {
    metadata: { name: slice, namespace: 'shop', labels: { 'kubernetes.io/service-name': svc } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [addr], conditions: { ready: true } }],
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  } as never);
}

function world(names: string[]): FakeKubeApi {
  const api = new FakeKubeApi();
  for (const [i, n] of names.entries()) {
    api.put(SVC, {
      metadata: { name: n, namespace: 'shop' },
      spec: { clusterIP: `10.96.0.${i + 1}`, ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
    } as never);
    putSlice(api, `${n}-a`, n, `10.1.${i}.1`);
  }
  return api;
}

async function resolver(api: FakeKubeApi, clock: FakeClock) {
  const r = await createKubeResolver({
    api,
    clock,
    random: () => 0.5,
    logger: memoryLogger(),
    maxWatches: 10,
    serviceScope: 'cluster',
    waitMs: 1_000,
    reflector: { listTimeoutMs: 5_000 },
  });
  await clock.advance(0);
  return r;
}

/** Lets the fake API's request ticks (setImmediate) and the reflectors' follow-ups run. */
async function settle(clock: FakeClock): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await new Promise((r) => setImmediate(r));
    await clock.advance(0);
  }
}

const sliceCalls = (api: FakeKubeApi, from: number) => api.calls.slice(from).filter((c) => c.path === SLICES);

test('selectorFor and namesOf round-trip a set of Service names', () => {
  const sel = selectorFor(['web', 'api', 'db']);
  assert.equal(sel, 'kubernetes.io/service-name in (api,db,web)');
  assert.deepEqual([...namesOf({ labelSelector: sel })], ['api', 'db', 'web']);
  assert.deepEqual([...namesOf({ labelSelector: 'kubernetes.io/service-name=web' })], []);
});

test('one slice watch per namespace; adding and removing a Service never drops the others', async () => {
  const api = world(['a', 'b', 'c', 'd']);
  const clock = new FakeClock();
  const r = await resolver(api, clock);
  // Checked on every request the resolver makes, i.e. at every step of each re-watch.
  let checks = 0;
  let watching: string[] = [];
  api.fault = () => {
    for (const n of watching) assert.equal(addrs(r.peek(key(n))).length, 1, `${n} kept during a set change`);
    checks++;
    return undefined;
  };
  for (const n of ['a', 'b']) {
    const p = r.resolve(key(n));
    await clock.advance(0);
    await clock.advance(1_000);
    await p;
    await settle(clock);
    watching.push(n);
  }
  assert.equal(api.openWatches(SLICES), 1, 'one watch for the namespace');
  assert.equal([...api.watchers][1]?.query.labelSelector, 'kubernetes.io/service-name in (a,b)');

  // Adding c: one list of the whole set from the last RV (watch cache), then one watch.
  let from = api.calls.length;
  const p = r.resolve(key('c'));
  await clock.advance(0);
  await clock.advance(1_000);
  assert.deepEqual(addrs(await p), ['10.1.2.1']);
  await settle(clock);
  const added = sliceCalls(api, from);
  assert.deepEqual(
    added.map((c) => c.op),
    ['list', 'watch'],
  );
  assert.equal(added[0]?.query.labelSelector, 'kubernetes.io/service-name in (a,b,c)');
  assert.equal(added[0]?.query.resourceVersionMatch, 'NotOlderThan');
  assert.notEqual(added[0]?.query.resourceVersion, '0', 'from the last RV, not from scratch');
  watching = ['a', 'b', 'c'];
  for (const n of watching) {
    const res = r.peek(key(n));
    assert.equal(res.kind === 'found' && res.source, 'api', n);
  }

  // A failed relist when d joins replaces nothing: a, b, c keep their endpoints.
  api.fault = (op, path) => {
    for (const n of watching) assert.equal(addrs(r.peek(key(n))).length, 1, `${n} kept`);
    return op === 'list' && path === SLICES ? status(500) : undefined;
  };
  void r.resolve(key('d'), { waitMs: 0 });
  await clock.advance(0);
  await clock.advance(5_000);
  await settle(clock);
  for (const n of watching) assert.equal(addrs(r.peek(key(n))).length, 1, `${n} kept after a failed relist`);
  assert.equal(r.peek(key('d')).kind, 'unknown');
  api.fault = () => undefined;
  await clock.advance(31_000);
  await settle(clock);
  assert.deepEqual(addrs(r.peek(key('d'))), ['10.1.3.1']);
  assert.equal(r.status().staleServices, 0);

  // Removing c (its Service is deleted): the watch resumes narrower, from the last RV, no list.
  from = api.calls.length;
  api.remove(SVC, 'c');
  await settle(clock);
  assert.equal(r.peek(key('c')).kind, 'absent');
  const removed = sliceCalls(api, from);
  assert.deepEqual(
    removed.map((c) => c.op),
    ['watch'],
  );
  assert.equal(removed[0]?.query.labelSelector, 'kubernetes.io/service-name in (a,b,d)');
  for (const n of ['a', 'b', 'd']) assert.equal(addrs(r.peek(key(n))).length, 1, `${n} kept after c left`);
  // ...and it still carries the others' changes.
  putSlice(api, 'a-a', 'a', '10.9.9.9');
  assert.deepEqual(addrs(r.peek(key('a'))), ['10.9.9.9']);
  assert.ok(checks > 3);
  await r.close();
});

test('a slice relabelled from one subscribed Service to another moves with its label', async () => {
  const api = world(['a', 'b']);
  const clock = new FakeClock();
  const r = await resolver(api, clock);
  for (const n of ['a', 'b']) {
    const p = r.resolve(key(n));
    await clock.advance(0);
    await clock.advance(1_000);
    await p;
  }
  putSlice(api, 'a-a', 'b', '10.1.0.1');
  assert.deepEqual(addrs(r.peek(key('a'))), []);
  assert.deepEqual(addrs(r.peek(key('b'))).sort(), ['10.1.0.1', '10.1.1.1']);
  await r.close();
});
