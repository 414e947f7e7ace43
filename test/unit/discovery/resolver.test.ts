import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FakeKubeApi, status, unavailable, type Fault } from '../../harness/fake-kube-api.ts';
import { createKubeResolver, type KubeResolverOptions } from '../../../src/discovery/resolver.ts';
import type { Resolution, ServiceKey } from '../../../src/discovery/types.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const SVC = '/api/v1/services';
const SLICES = (ns: string): string => `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;

function putService(api: FakeKubeApi, ns: string, name: string, ip: string, path = SVC): void {
  api.put(path, {
    metadata: { name, namespace: ns },
    spec: { clusterIP: ip, ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
  } as never);
}

function putSlice(api: FakeKubeApi, ns: string, svc: string, slice: string, addrs: string[]): void {
  api.put(SLICES(ns), {
    metadata: { name: slice, namespace: ns, labels: { 'kubernetes.io/service-name': svc } },
    addressType: 'IPv4',
    endpoints: addrs.map((a) => ({ addresses: [a], conditions: { ready: true } })),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  } as never);
}

const key = (name: string, namespace = 'shop'): ServiceKey => ({ namespace, name });
const addrs = (r: Resolution): string[] =>
  r.kind === 'found' ? (r.service.endpoints.get('http') ?? []).map((e) => e.address) : [];
const state = (r: Resolution): string => (r.kind === 'found' ? r.freshness.state : r.kind);

async function setup(
  over: Partial<KubeResolverOptions> = {},
  api = new FakeKubeApi(),
  clock = new FakeClock(),
) {
  const log = memoryLogger();
  const r = await createKubeResolver({
    api,
    clock,
    random: () => 0.5,
    logger: log,
    maxWatches: 10,
    serviceScope: 'cluster',
    waitMs: 1_000,
    reflector: { listTimeoutMs: 5_000 },
    ...over,
  });
  await clock.advance(0);
  return { api, clock, log, r };
}

/** resolve() on a fake clock: the wait timer only fires when time moves. */
async function resolve(clock: FakeClock, r: { resolve(k: ServiceKey): Promise<Resolution> }, k: ServiceKey) {
  const p = r.resolve(k);
  await clock.advance(0);
  await clock.advance(1_000);
  return p;
}

test('a lookup subscribes on demand and answers fresh merged endpoints', async () => {
  const api = new FakeKubeApi();
  putService(api, 'shop', 'web', '10.96.0.1');
  putSlice(api, 'shop', 'web', 'web-1', ['10.1.0.1', '10.1.0.2']);
  const { clock, r } = await setup({}, api);
  assert.equal(r.ready(), true);
  assert.equal(api.openWatches(SLICES('shop')), 0, 'no slice watch before a lookup');
  const res = await resolve(clock, r, key('web'));
  assert.deepEqual(addrs(res), ['10.1.0.1', '10.1.0.2']);
  assert.equal(state(res), 'fresh');
  assert.equal(res.kind === 'found' && res.source, 'api');
  assert.equal(api.openWatches(SLICES('shop')), 1);
  assert.deepEqual(r.byClusterIP('10.96.0.1'), key('web'));
  putSlice(api, 'shop', 'web', 'web-2', ['10.1.0.3']);
  assert.deepEqual(addrs(r.peek(key('web'))), ['10.1.0.1', '10.1.0.2', '10.1.0.3']);
  await r.close();
});

test('a Service missing from the complete index is absent, without opening a watch', async () => {
  const api = new FakeKubeApi();
  putService(api, 'shop', 'web', '10.96.0.1');
  const { clock, r } = await setup({}, api);
  const res = await resolve(clock, r, key('example', 'com'));
  assert.equal(res.kind, 'absent');
  assert.equal(api.openWatches(SLICES('com')), 0);
  await r.close();
});

test('an API outage keeps every endpoint, marked stale, logged once per Service; recovery clears it', async () => {
  const api = new FakeKubeApi();
  for (let i = 0; i < 5; i++) {
    putService(api, 'shop', `s${i}`, `10.96.0.${i + 1}`);
    putSlice(api, 'shop', `s${i}`, `s${i}-a`, [`10.1.${i}.1`]);
  }
  const { clock, log, r } = await setup({}, api);
  for (let i = 0; i < 5; i++) await resolve(clock, r, key(`s${i}`));
  const before = [0, 1, 2, 3, 4].map((i) => addrs(r.peek(key(`s${i}`))));

  let fault: Fault = unavailable();
  api.fault = () => fault;
  api.breakWatches(new Error('connection reset'));
  await clock.advance(600_000);
  for (let i = 0; i < 5; i++) {
    const res = await r.resolve(key(`s${i}`));
    assert.deepEqual(addrs(res), before[i]);
    assert.equal(state(res), 'stale');
  }
  assert.equal(r.status().staleServices, 5);
  const staleLines = log.lines.filter((l) => l.msg === 'discovery data is stale; serving last-known-good');
  assert.equal(staleLines.length, 5, 'one line per Service transition, not per retry');
  assert.ok(!JSON.stringify(log.lines).includes('authorization'));

  fault = undefined;
  await clock.advance(31_000);
  putSlice(api, 'shop', 's0', 's0-a', ['10.1.0.9']);
  assert.deepEqual(addrs(r.peek(key('s0'))), ['10.1.0.9']);
  assert.equal(r.status().staleServices, 0);
  await r.close();
});

test('the Skipper failure: Service reads succeed, EndpointSlice relists fail (500, reset, stall, 401, 403): nothing is removed', async () => {
  for (const f of [status(500), unavailable('socket hang up'), 'stall' as const, status(401), status(403)]) {
    const api = new FakeKubeApi();
    // s1 lives in its own namespace: slices are watched per namespace, so its list is the one failing.
    const nsOf = (i: number): string => (i === 1 ? 'pay' : 'shop');
    for (let i = 0; i < 3; i++) {
      putService(api, nsOf(i), `s${i}`, `10.96.0.${i + 1}`);
      putSlice(api, nsOf(i), `s${i}`, `s${i}-a`, [`10.1.${i}.1`, `10.1.${i}.2`]);
    }
    const { clock, r } = await setup({}, api);
    for (let i = 0; i < 3; i++) await resolve(clock, r, key(`s${i}`, nsOf(i)));
    api.fault = (op, path) => (path === SLICES('pay') && op === 'list' ? f : undefined);
    // Everything relists (410 on every watch); only s1's slice list fails.
    api.sendError(410);
    await clock.advance(120_000);
    for (let i = 0; i < 3; i++)
      assert.equal(addrs(r.peek(key(`s${i}`, nsOf(i)))).length, 2, `${String(f)}: s${i} kept`);
    assert.equal(state(r.peek(key('s1', 'pay'))), 'stale');
    assert.equal(state(r.peek(key('s0'))), 'fresh');
    await r.close();
  }
});

test('watch DELETED events are authoritative: a removed slice or Service goes away', async () => {
  const api = new FakeKubeApi();
  putService(api, 'shop', 'web', '10.96.0.1');
  putSlice(api, 'shop', 'web', 'web-1', ['10.1.0.1']);
  putSlice(api, 'shop', 'web', 'web-2', ['10.1.0.2']);
  const { clock, r } = await setup({}, api);
  await resolve(clock, r, key('web'));
  api.remove(SLICES('shop'), 'web-2');
  assert.deepEqual(addrs(r.peek(key('web'))), ['10.1.0.1']);
  api.remove(SVC, 'web');
  assert.equal(r.peek(key('web')).kind, 'absent');
  assert.equal(r.byClusterIP('10.96.0.1'), undefined);
  await r.close();
});

test('the LRU bounds live watches; evicted Services resolve from the cold tier during an outage', async () => {
  const api = new FakeKubeApi();
  for (let i = 0; i < 9; i++) {
    putService(api, 'shop', `s${i}`, `10.96.1.${i + 1}`);
    putSlice(api, 'shop', `s${i}`, `s${i}-a`, [`10.2.${i}.1`]);
  }
  const { clock, r } = await setup({ maxWatches: 3 }, api);
  for (let i = 0; i < 9; i++) {
    await resolve(clock, r, key(`s${i}`));
    assert.ok(api.openWatches(SLICES('shop')) <= 3);
  }
  assert.equal(r.status().subscriptions, 3);
  assert.equal(r.status().counters?.coldServices, 6);
  const cold = r.peek(key('s0'));
  assert.equal(cold.kind === 'found' && cold.source, 'cold');
  assert.equal(state(cold), 'stale');

  api.fault = () => unavailable();
  api.breakWatches(new Error('apiserver gone'));
  for (let i = 0; i < 9; i++) {
    const res = await r.resolve(key(`s${i}`));
    assert.deepEqual(addrs(res), [`10.2.${i}.1`], `s${i} during the outage`);
    await clock.advance(10);
    assert.ok(api.openWatches(SLICES('shop')) <= 3);
  }
  await r.close();
});

test('namespace scope: one Service watch per namespace plus one slice watch per subscription', async () => {
  const api = new FakeKubeApi();
  const nsPath = '/api/v1/namespaces/shop/services';
  putService(api, 'shop', 'web', '10.96.0.1', nsPath);
  putSlice(api, 'shop', 'web', 'web-1', ['10.1.0.1']);
  const { clock, r } = await setup({ serviceScope: 'namespace', homeNamespace: 'shop' }, api);
  assert.equal(r.ready(), true, 'ready after the home namespace synced');
  const res = await resolve(clock, r, key('web'));
  assert.deepEqual(addrs(res), ['10.1.0.1']);
  assert.equal(api.openWatches(nsPath), 1);
  assert.equal(api.openWatches('/api/v1/services'), 0);
  assert.equal((await resolve(clock, r, key('nope'))).kind, 'absent');
  await r.close();
});

test('snapshot: written debounced and atomically, loaded before the first sync as stale', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-snap-'));
  const path = join(dir, 'snapshot.pb');
  try {
    const api = new FakeKubeApi();
    putService(api, 'shop', 'web', '10.96.0.1');
    putSlice(api, 'shop', 'web', 'web-1', ['10.1.0.1']);
    const clock = new FakeClock();
    const a = await setup({ snapshotPath: path, snapshotDebounceMs: 2_000 }, api, clock);
    await resolve(clock, a.r, key('web'));
    await a.r.close();
    assert.deepEqual(readdirSync(dir), ['snapshot.pb'], 'no temp file left behind');

    const down = new FakeKubeApi();
    down.fault = () => unavailable();
    const b = await setup({ snapshotPath: path }, down);
    assert.equal(b.r.ready(), true, 'ready from the snapshot');
    const res = b.r.peek(key('web'));
    assert.deepEqual(addrs(res), ['10.1.0.1']);
    assert.equal(res.kind === 'found' && res.source, 'snapshot');
    assert.equal(state(res), 'stale');
    assert.deepEqual(b.r.byClusterIP('10.96.0.1'), key('web'));
    assert.deepEqual(addrs(await b.r.resolve(key('web'))), ['10.1.0.1']);
    await b.r.close();

    writeFileSync(path, Buffer.from('ORSNAP1\n\0\0\0\0garbage'));
    const c = await setup({ snapshotPath: path }, down);
    assert.equal(c.r.ready(), false);
    assert.equal(c.r.peek(key('web')).kind, 'unknown');
    assert.equal(c.log.lines.filter((l) => l.msg === 'snapshot ignored').length, 1);
    await c.r.close();
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('an unknown Service during an outage with no data is unknown after the wait, not absent', async () => {
  const api = new FakeKubeApi();
  api.fault = () => unavailable();
  const { clock, r } = await setup({}, api);
  assert.equal(r.ready(), false);
  const res = await resolve(clock, r, key('web'));
  assert.equal(res.kind, 'unknown');
  await r.close();
});

test('a Service that does not exist keeps no slice watch, and is found once it is created', async () => {
  const api = new FakeKubeApi();
  const nsPath = '/api/v1/namespaces/shop/services';
  const { clock, r } = await setup({ serviceScope: 'namespace', homeNamespace: 'other' }, api);
  assert.equal((await resolve(clock, r, key('later'))).kind, 'absent');
  await clock.advance(0);
  assert.equal(api.openWatches(SLICES('shop')), 0, 'the slice watch of an absent Service is closed');
  assert.equal(r.status().subscriptions, 0);
  assert.equal((await resolve(clock, r, key('later'))).kind, 'absent');
  assert.equal(api.openWatches(SLICES('shop')), 0, 'answered from the negative cache, no new subscription');
  putService(api, 'shop', 'later', '10.96.0.9', nsPath);
  putSlice(api, 'shop', 'later', 'later-1', ['10.1.9.1']);
  await clock.advance(60_000);
  assert.deepEqual(addrs(await resolve(clock, r, key('later'))), ['10.1.9.1']);
  assert.equal(api.openWatches(SLICES('shop')), 1);
  await r.close();
});

const NS_SERVICES = (ns: string): string => `/api/v1/namespaces/${ns}/services`;

test('namespace scope: names in namespaces without such a Service open no watch at all', async () => {
  const api = new FakeKubeApi();
  const { clock, r } = await setup(
    { serviceScope: 'namespace', homeNamespace: 'home', maxWatches: 5, absentMs: 3_600_000 },
    api,
  );
  const listsBefore = api.calls.filter((c) => c.op === 'list').length;
  for (let i = 0; i < 200; i++) {
    assert.equal((await resolve(clock, r, key('x', `ns-${i}`))).kind, 'absent', `x.ns-${i}`);
    await clock.advance(0);
    assert.equal(api.openWatches(), 1, `only the home namespace watch after x.ns-${i}`);
  }
  assert.equal(api.calls.filter((c) => c.op === 'list').length - listsBefore, 200, 'one LIST per name');
  assert.equal(r.status().subscriptions, 0);
  // Looked up again within the negative cache time: no request at all.
  const calls = api.calls.length;
  for (let i = 0; i < 200; i++) assert.equal(r.peek(key('x', `ns-${i}`)).kind, 'absent');
  for (let i = 0; i < 200; i++) assert.equal((await resolve(clock, r, key('x', `ns-${i}`))).kind, 'absent');
  assert.equal(api.calls.length, calls);
  await r.close();
});

test('namespace scope: --max-watches bounds slice and Service watches together; evicted data goes cold', async () => {
  const api = new FakeKubeApi();
  for (let i = 0; i < 12; i++) {
    putService(api, `ns-${i}`, 'web', `10.96.2.${i + 1}`, NS_SERVICES(`ns-${i}`));
    putSlice(api, `ns-${i}`, 'web', 'web-a', [`10.3.${i}.1`]);
  }
  const { clock, r } = await setup({ serviceScope: 'namespace', homeNamespace: 'home', maxWatches: 5 }, api);
  for (let i = 0; i < 12; i++) {
    assert.deepEqual(addrs(await resolve(clock, r, key('web', `ns-${i}`))), [`10.3.${i}.1`], `web.ns-${i}`);
    await clock.advance(0);
    assert.ok(api.openWatches() <= 5 + 1, `${api.openWatches()} watches after web.ns-${i}`);
  }
  assert.equal(api.openWatches(NS_SERVICES('ns-11')), 1, 'the newest namespace is watched');
  assert.equal(api.openWatches(NS_SERVICES('ns-0')), 0, 'an evicted namespace is not');
  api.fault = () => unavailable();
  api.breakWatches(new Error('apiserver gone'));
  for (let i = 0; i < 12; i++) {
    const res = await r.resolve(key('web', `ns-${i}`), { waitMs: 0 });
    assert.deepEqual(addrs(res), [`10.3.${i}.1`], `web.ns-${i} during the outage`);
  }
  await r.close();
});

test('namespace scope: a Service created after a negative answer is found once the negative cache expires', async () => {
  const api = new FakeKubeApi();
  const { clock, r } = await setup({ serviceScope: 'namespace', homeNamespace: 'home' }, api);
  assert.equal((await resolve(clock, r, key('later', 'shop'))).kind, 'absent');
  putService(api, 'shop', 'later', '10.96.0.9', NS_SERVICES('shop'));
  putSlice(api, 'shop', 'later', 'later-1', ['10.1.9.1']);
  assert.equal((await resolve(clock, r, key('later', 'shop'))).kind, 'absent', 'cached');
  await clock.advance(60_000);
  assert.deepEqual(addrs(await resolve(clock, r, key('later', 'shop'))), ['10.1.9.1']);
  assert.equal(api.openWatches(NS_SERVICES('shop')), 1);
  await r.close();
});

test('namespace scope: a failed existence check answers unknown, opens nothing, and is retried later', async () => {
  const api = new FakeKubeApi();
  putService(api, 'shop', 'web', '10.96.0.1', NS_SERVICES('shop'));
  putSlice(api, 'shop', 'web', 'web-1', ['10.1.0.1']);
  const { clock, r } = await setup({ serviceScope: 'namespace', homeNamespace: 'home' }, api);
  api.fault = (_op, path) => (path === NS_SERVICES('shop') ? status(500) : undefined);
  assert.equal((await resolve(clock, r, key('web'))).kind, 'unknown');
  assert.equal(api.openWatches(), 1, 'only the home namespace watch');
  api.fault = () => undefined;
  await clock.advance(10_000);
  assert.deepEqual(addrs(await resolve(clock, r, key('web'))), ['10.1.0.1']);
  await r.close();
});

test('namespace scope: concurrent lookups of one unwatched name share one existence check', async () => {
  const api = new FakeKubeApi();
  const { clock, r } = await setup({ serviceScope: 'namespace', homeNamespace: 'home' }, api);
  const lists = (): number => api.calls.filter((c) => c.path === NS_SERVICES('com')).length;
  const all = Promise.all([1, 2, 3].map(() => r.resolve(key('example', 'com'))));
  await clock.advance(0);
  assert.deepEqual(
    (await all).map((res) => res.kind),
    ['absent', 'absent', 'absent'],
  );
  assert.equal(lists(), 1);
  await r.close();
});
