import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { FakeKubeApi, gone, status, unavailable } from '../../harness/fake-kube-api.ts';
import { KubeError } from '../../../src/kube/api.ts';
import { Recovery } from '../../../src/discovery/recovery.ts';
import { Reflector, type ReflectorOptions, type ReflectorSink } from '../../../src/discovery/reflector.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const PATH = '/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices';
const slice = (
  name: string,
): { metadata: { name: string; namespace: string; labels: Record<string, string> } } => ({
  metadata: { name, namespace: 'ns', labels: { 'kubernetes.io/service-name': 'web' } },
});

class RecordingSink implements ReflectorSink {
  objects = new Map<string, unknown>();
  replaced = 0;
  failures: string[] = [];
  syncs = 0;
  replace(items: unknown[]): void {
    this.replaced++;
    this.objects = new Map(items.map((i) => [(i as { metadata: { name: string } }).metadata.name, i]));
  }
  event(type: string, o: unknown): void {
    const name = (o as { metadata: { name: string } }).metadata.name;
    if (type === 'DELETED') this.objects.delete(name);
    else this.objects.set(name, o);
  }
  synced(): void {
    this.syncs++;
  }
  failed(reason: string): void {
    this.failures.push(reason);
  }
}

function setup(random = (): number => 0.5, recovery?: Recovery, extra: Partial<ReflectorOptions> = {}) {
  const api = new FakeKubeApi();
  const clock = new FakeClock();
  const sink = new RecordingSink();
  const log = memoryLogger();
  const r = new Reflector({
    name: 'test',
    api,
    path: PATH,
    selectors: { labelSelector: 'kubernetes.io/service-name=web' },
    sink,
    clock,
    random,
    logger: log,
    listTimeoutMs: 10_000,
    ...(recovery ? { recovery } : {}),
    ...extra,
  });
  return { api, clock, sink, log, r };
}

/**
 * An API server restart: the running reflector's watch breaks and its retries fail for 2 s, then
 * the server is back without our RV (the first watch gets 410). `back` runs at that moment.
 */
async function restart(
  api: FakeKubeApi,
  clock: FakeClock,
  back: () => void = () => undefined,
): Promise<{ backAt: number; goneAt: number; relistAt: number }> {
  await clock.advance(0);
  await delay(5);
  let down = true;
  let goneAt: number | undefined;
  let relistAt: number | undefined;
  api.fault = (op) => {
    if (down) return unavailable();
    if (op === 'watch' && goneAt === undefined) {
      goneAt = clock.now();
      return gone();
    }
    if (op === 'list') relistAt ??= clock.now();
    return undefined;
  };
  api.breakWatches(unavailable('connection reset'));
  await clock.advance(2_000);
  await delay(5);
  down = false;
  const backAt = clock.now();
  back();
  for (let i = 0; i < 80 && relistAt === undefined; i++) {
    await clock.advance(250);
    await delay(2);
  }
  assert.ok(goneAt !== undefined && relistAt !== undefined);
  return { backAt, goneAt, relistAt };
}

const lastWatch = (api: FakeKubeApi) => api.calls.filter((c) => c.op === 'watch').at(-1)?.query;
const lists = (api: FakeKubeApi) => api.calls.filter((c) => c.op === 'list').map((c) => c.query);

test('lists at RV 0 from the cache, then watches from the list RV with bookmarks and a random timeout', async () => {
  const { api, clock, sink, r } = setup(() => 0.25);
  api.put(PATH, slice('a'));
  r.start();
  await clock.advance(0);
  assert.deepEqual(lists(api)[0], {
    labelSelector: 'kubernetes.io/service-name=web',
    resourceVersion: '0',
    resourceVersionMatch: 'NotOlderThan',
  });
  const w = lastWatch(api);
  assert.equal(w?.resourceVersion, '101');
  assert.equal(w?.allowWatchBookmarks, 'true');
  assert.equal(w?.timeoutSeconds, '375', '300 + 0.25 * 300');
  api.put(PATH, slice('b'));
  api.remove(PATH, 'a');
  assert.deepEqual([...sink.objects.keys()], ['b']);
  assert.equal(r.watching, true);
  await r.stop();
});

test('a failed watch keeps every object, marks failure once per attempt, and resumes at the last RV without relisting', async () => {
  for (const err of [unavailable(), status(500), status(401), status(403), status(429)]) {
    const { api, clock, sink, r } = setup();
    api.put(PATH, slice('a'));
    r.start();
    await clock.advance(0);
    api.bookmark();
    api.fault = (op) => (op === 'watch' ? err : undefined);
    api.breakWatches(new Error('stream cut'));
    await clock.advance(60_000);
    assert.ok(sink.failures.length >= 2, `${err.message}: retried`);
    assert.equal(sink.replaced, 1, `${err.message}: never relisted on a transient error`);
    assert.deepEqual([...sink.objects.keys()], ['a'], `${err.message}: nothing removed`);
    api.fault = () => undefined;
    await clock.advance(60_000);
    assert.equal(r.watching, true, `${err.message}: watching again`);
    assert.equal(lastWatch(api)?.resourceVersion, '101');
    await r.stop();
  }
});

test('410 mid-watch relists at the last RV; a 410 on that relist does a consistent read', async () => {
  const { api, clock, sink, r } = setup();
  api.put(PATH, slice('a'));
  r.start();
  await clock.advance(0);
  api.put(PATH, slice('b'));
  api.fault = (op, _p, q) => (op === 'list' && q.resourceVersion === '102' ? gone() : undefined);
  api.sendError(410);
  await clock.advance(0);
  assert.deepEqual(
    lists(api).map((q) => [q.resourceVersion, q.resourceVersionMatch]),
    [
      ['0', 'NotOlderThan'],
      ['102', 'NotOlderThan'],
      ['', undefined],
    ],
  );
  assert.deepEqual([...sink.objects.keys()].sort(), ['a', 'b']);
  assert.equal(sink.failures.length, 0, '410 is not an outage');
  assert.equal(r.watching, true);
  await r.stop();
});

test('a relist that fails (500, reset, stall) never replaces the data', async () => {
  for (const fault of [status(500), unavailable('socket hang up'), 'stall' as const]) {
    const { api, clock, sink, r } = setup();
    api.put(PATH, slice('a'));
    api.put(PATH, slice('b'));
    r.start();
    await clock.advance(0);
    api.fault = (op) => (op === 'list' ? fault : undefined);
    api.sendError(410);
    await clock.advance(120_000);
    assert.equal(sink.replaced, 1);
    assert.deepEqual([...sink.objects.keys()].sort(), ['a', 'b']);
    assert.ok(sink.failures.length >= 1);
    if (fault === 'stall') assert.match(sink.failures[0] ?? '', /timed out/);
    await r.stop();
  }
});

test('backoff is full-jitter exponential from 800 ms with a 30 s cap', async () => {
  const { api, clock, r } = setup(() => 0.999);
  api.fault = () => unavailable();
  r.start();
  const delays: number[] = [];
  for (let i = 0; i < 9; i++) {
    await clock.advance(0);
    delays.push(Math.max(...clock.pending()));
    await clock.advance(delays.at(-1) ?? 0);
  }
  assert.deepEqual(delays, [799, 1598, 3196, 6393, 12787, 25574, 29970, 29970, 29970]);
  await r.stop();
});

test('a watch silent past its inactivity limit is dropped and resumed, without being called stale', async () => {
  const { api, clock, sink, r } = setup(() => 0);
  api.put(PATH, slice('a'));
  r.start();
  await clock.advance(0);
  const before = api.calls.length;
  await clock.advance(330_000 + 1);
  assert.equal(api.calls.length, before + 1);
  assert.equal(lastWatch(api)?.resourceVersion, '101');
  assert.equal(sink.failures.length, 0);
  await r.stop();
});

test('a recovery signal ends a long backoff early', async () => {
  const recovery = new Recovery();
  const { api, clock, r } = setup(() => 0.999, recovery);
  api.fault = () => unavailable();
  r.start();
  for (let i = 0; i < 8; i++) await clock.advance(30_000);
  api.fault = () => undefined;
  const before = api.calls.length;
  recovery.notify();
  await clock.advance(1_000);
  assert.ok(api.calls.length > before, 'retried within the recovery spread, not after up to 30 s');
  await r.stop();
});

test('stop() ends the loop and closes the watch', async () => {
  const { api, clock, r } = setup();
  r.start();
  await clock.advance(0);
  assert.equal(api.openWatches(), 1);
  await r.stop();
  assert.equal(api.openWatches(), 0);
  assert.equal(r.watching, false);
});

test('repeated 410s keep relisting after a backoff pause and never re-watch the expired RV', async () => {
  const { api, clock, sink, r } = setup();
  api.put(PATH, slice('a'));
  api.fault = (op) => (op === 'watch' ? gone() : undefined);
  r.start();
  await clock.advance(120_000);
  const watches = api.calls.filter((c) => c.op === 'watch');
  assert.ok(lists(api).length >= 6, `relisted ${lists(api).length} times`);
  assert.ok(watches.length <= lists(api).length, 'every watch follows a fresh list');
  assert.ok(sink.failures.length >= 1, 'persistent 410s count as a failure (stale)');
  assert.ok(lists(api).length < 200, 'no hot loop');
  assert.deepEqual([...sink.objects.keys()], ['a']);
  await r.stop();
});

test('stop() from inside a sink callback (between list and watch) leaves no watch running', async () => {
  const { api, clock, sink, r } = setup();
  api.put(PATH, slice('a'));
  const replace = sink.replace.bind(sink);
  let stopped: Promise<void> | undefined;
  sink.replace = (items) => {
    replace(items);
    stopped = r.stop();
  };
  r.start();
  await clock.advance(0);
  // A liveness guard, not a timing assertion: with the bug, stop() never resolves.
  const guard = new AbortController();
  const hung = delay(5_000, 'hung', { signal: guard.signal }).catch(() => 'cancelled');
  const outcome = await Promise.race([stopped?.then(() => 'stopped'), hung]);
  guard.abort();
  assert.equal(outcome, 'stopped');
  assert.equal(api.openWatches(), 0);
  assert.equal(r.watching, false);
});

test('reselect: a narrower selector re-watches from the last RV; a wider one relists from it first', async () => {
  const { api, clock, sink, r } = setup();
  api.put(PATH, slice('a'));
  r.start();
  await clock.advance(0);
  await delay(5);
  const rv = lastWatch(api)?.resourceVersion;
  const listsBefore = lists(api).length;

  r.reselect({ labelSelector: 'kubernetes.io/service-name in (web)' }, { relist: false });
  await clock.advance(0);
  await delay(5);
  assert.equal(lists(api).length, listsBefore, 'no list for a narrower selection');
  assert.equal(lastWatch(api)?.labelSelector, 'kubernetes.io/service-name in (web)');
  assert.equal(lastWatch(api)?.resourceVersion, rv);
  assert.equal(sink.failures.length, 0, 'a reselect is not a failure');

  r.reselect({ labelSelector: 'kubernetes.io/service-name in (api,web)' }, { relist: true });
  await clock.advance(0);
  await delay(5);
  const relist = lists(api).at(-1);
  assert.equal(relist?.labelSelector, 'kubernetes.io/service-name in (api,web)');
  assert.equal(relist?.resourceVersion, rv, 'from the last RV (NotOlderThan), not from scratch');
  assert.equal(relist?.resourceVersionMatch, 'NotOlderThan');
  assert.equal(lastWatch(api)?.labelSelector, 'kubernetes.io/service-name in (api,web)');
  assert.equal(sink.failures.length, 0);
  await r.stop();
});

test('reselect during a list: the list finishes with the old selectors, then a relist with the new ones', async () => {
  const { api, clock, sink, r } = setup();
  api.put(PATH, slice('a'));
  r.start(); // the list is in flight (the fake answers on the next tick)
  r.reselect({ labelSelector: 'kubernetes.io/service-name in (api,web)' }, { relist: true });
  await clock.advance(0);
  await delay(5);
  const calls = api.calls.map((c) => `${c.op} ${c.query.labelSelector}`);
  assert.deepEqual(calls.slice(0, 3), [
    'list kubernetes.io/service-name=web',
    'list kubernetes.io/service-name in (api,web)',
    'watch kubernetes.io/service-name in (api,web)',
  ]);
  assert.equal(sink.replaced, 2);
  await r.stop();
});

test('a 410 right after a failure streak (the API server restarted) relists after a random spread', async () => {
  const { api, clock, r } = setup(undefined, undefined, { relistSpreadMs: 10_000 });
  r.start();
  const { goneAt, relistAt } = await restart(api, clock);
  assert.ok(relistAt - goneAt >= 5_000, `relisted ${relistAt - goneAt} ms after the 410 (0.5 × 10 s spread)`);
  await r.stop();
});

test('a 410 on a healthy watch relists at once (no spread: no outage, no wave)', async () => {
  const { api, clock, r } = setup();
  r.start();
  await clock.advance(0);
  await delay(5);
  const before = lists(api).length;
  api.sendError(410);
  await clock.advance(0);
  await delay(5);
  assert.equal(lists(api).length, before + 1);
  await r.stop();
});

test('after an outage, a reconnect woken by the recovery signal waits one spread: the 410 that follows relists at once', async () => {
  const recovery = new Recovery();
  const { api, clock, r } = setup(undefined, recovery, {
    // A long backoff: the retry comes from the recovery signal, not from the backoff timer.
    backoff: { initialMs: 120_000, maxMs: 120_000, factor: 1 },
    recoverySpreadMs: 10_000,
    relistSpreadMs: 10_000,
  });
  r.start();
  // Another reflector of the sidecar saw the API server answer again.
  const { backAt, goneAt, relistAt } = await restart(api, clock, () => recovery.notify());
  assert.equal(goneAt - backAt, 5_000, 'the resumed watch waited the recovery spread (0.5 × 10 s)');
  assert.ok(relistAt - goneAt < 1_000, `relisted ${relistAt - goneAt} ms after the 410: no second spread`);
  await r.stop();
});

test('a 429 with Retry-After waits at least that long plus jitter, and a recovery signal does not cut it short', async () => {
  const recovery = new Recovery();
  const { api, clock, r } = setup(undefined, recovery);
  const listsAt: number[] = [];
  api.fault = (op) => {
    if (op !== 'list') return undefined;
    listsAt.push(clock.now());
    return listsAt.length === 1
      ? new KubeError('kube_unavailable', 'HTTP 429 too many requests', 429, { retryAfterMs: 4_000 })
      : undefined;
  };
  r.start();
  await clock.advance(0);
  await delay(5);
  recovery.notify();
  for (let i = 0; i < 40 && listsAt.length < 2; i++) {
    await clock.advance(250);
    await delay(2);
  }
  assert.equal(listsAt.length, 2);
  assert.equal((listsAt[1] ?? 0) - (listsAt[0] ?? 0), 6_000, '4 s asked + 0.5 × 4 s of jitter');
  await r.stop();
});
