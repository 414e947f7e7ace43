import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BundleDistributor,
  MANAGED_BY,
  MANAGER,
  type BundleMap,
  type BundleMapsApi,
} from '../../../src/mesh/bundle-distributor.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { FakeClock } from '../../harness/fake-clock.ts';

const log = createLogger({ write: () => {} });
const NAME = 'outrigger-trust-bundle';
const ROOTS = '-----BEGIN CERTIFICATE-----\nnew\n-----END CERTIFICATE-----';
const OLD = '-----BEGIN CERTIFICATE-----\nold\n-----END CERTIFICATE-----';
const ours = { [MANAGED_BY]: MANAGER };

/** An API server of namespaces and ConfigMaps of one name, recording every write; faults on demand. */
class FakeMaps implements BundleMapsApi {
  labelled = new Set<string>();
  maps = new Map<string, BundleMap>();
  writes: string[] = [];
  failReads = false;
  failWritesIn = new Set<string>();
  watchers: (() => void)[] = [];

  namespaces(): Promise<string[]> {
    return this.failReads ? Promise.reject(new Error('apiserver down')) : Promise.resolve([...this.labelled]);
  }

  named(name: string): Promise<BundleMap[]> {
    assert.equal(name, NAME);
    return Promise.resolve([...this.maps.values()].map((m) => structuredClone(m)));
  }

  create(namespace: string, cm: object): Promise<'ok' | 'conflict'> {
    if (this.failWritesIn.has(namespace)) return Promise.reject(new Error('HTTP 500'));
    this.writes.push(`create ${namespace}`);
    if (this.maps.has(namespace)) return Promise.resolve('conflict');
    const { metadata, data } = cm as {
      metadata: { labels: Record<string, string> };
      data: Record<string, string>;
    };
    this.maps.set(namespace, { namespace, labels: metadata.labels, data });
    return Promise.resolve('ok');
  }

  mergePatch(path: string, patch: unknown): Promise<void> {
    const ns = /^\/api\/v1\/namespaces\/([^/]+)\/configmaps\/outrigger-trust-bundle$/.exec(path)?.[1] ?? '';
    if (this.failWritesIn.has(ns)) return Promise.reject(new Error('HTTP 500'));
    this.writes.push(`patch ${ns}`);
    const m = this.maps.get(ns);
    assert.ok(m, `patch of a missing ConfigMap in ${ns}`);
    const p = patch as { metadata: { labels: Record<string, string> }; data: Record<string, string> };
    Object.assign(m.labels, p.metadata.labels);
    Object.assign(m.data, p.data);
    return Promise.resolve();
  }

  watchNamespaces(_selector: string, onChange: () => void, signal: AbortSignal): Promise<void> {
    this.watchers.push(onChange);
    return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  }
}

function setup(api: FakeMaps, clock = new FakeClock()) {
  let roots = ROOTS;
  const d = new BundleDistributor({
    api,
    bundle: () => roots,
    namespaceSelector: 'outrigger.dev/injection=enabled',
    name: NAME,
    key: 'ca.crt',
    resyncMs: 60_000,
    clock,
    random: () => 0.5,
    log,
  });
  return { d, clock, rotate: (pem: string) => void (roots = pem) };
}

test('creates the bundle where missing, rewrites a stale one, keeps other keys, leaves current ones alone', async () => {
  const api = new FakeMaps();
  api.labelled = new Set(['shop', 'web', 'pay']);
  api.maps.set('web', { namespace: 'web', labels: { team: 'a' }, data: { 'ca.crt': OLD, extra: 'x' } });
  api.maps.set('pay', { namespace: 'pay', labels: { ...ours }, data: { 'ca.crt': ROOTS } });
  const { d } = setup(api);
  assert.equal(await d.sync(), true);
  assert.deepEqual(api.writes.sort(), ['create shop', 'patch web']);
  assert.deepEqual(api.maps.get('web'), {
    namespace: 'web',
    labels: { team: 'a', ...ours },
    data: { 'ca.crt': ROOTS, extra: 'x' },
  });
  assert.deepEqual(api.maps.get('shop')?.data, { 'ca.crt': ROOTS });
  assert.deepEqual(d.view(), { namespaces: 3, current: 3, lastSync: d.view().lastSync });
  // A second round finds everything current: no writes.
  api.writes = [];
  assert.equal(await d.sync(), true);
  assert.deepEqual(api.writes, []);
});

test('a namespace that opted out keeps a current bundle; unmanaged ConfigMaps elsewhere are untouched; nothing is deleted', async () => {
  const api = new FakeMaps();
  api.maps.set('old', { namespace: 'old', labels: { ...ours }, data: { 'ca.crt': OLD } });
  api.maps.set('other', { namespace: 'other', labels: {}, data: { 'ca.crt': 'theirs' } });
  const { d } = setup(api);
  assert.equal(await d.sync(), true);
  assert.deepEqual(api.writes, ['patch old']);
  assert.equal(api.maps.get('other')?.data['ca.crt'], 'theirs');
  assert.equal(api.maps.size, 2);
});

test('a failed read writes nothing; a failed write is retried and reported', async () => {
  const api = new FakeMaps();
  api.labelled = new Set(['shop', 'web']);
  api.failReads = true;
  const { d } = setup(api);
  assert.equal(await d.sync(), false);
  assert.deepEqual(api.writes, []);
  assert.match(d.view().lastError ?? '', /apiserver down/);

  api.failReads = false;
  api.failWritesIn.add('web');
  assert.equal(await d.sync(), false);
  assert.deepEqual(api.writes, ['create shop']);
  assert.equal(d.view().current, 1);
  assert.match(d.view().lastError ?? '', /HTTP 500/);

  api.failWritesIn.clear();
  assert.equal(await d.sync(), true);
  assert.equal(d.view().lastError, undefined);
  assert.equal(api.maps.size, 2);
});

test('a create that races another replica is a conflict, settled on the next round', async () => {
  const api = new FakeMaps();
  api.labelled = new Set(['shop']);
  const named = api.named.bind(api);
  // The list misses the ConfigMap another replica has just created.
  api.named = () => named(NAME).then(() => []);
  api.maps.set('shop', { namespace: 'shop', labels: { ...ours }, data: { 'ca.crt': ROOTS } });
  const { d } = setup(api);
  assert.equal(await d.sync(), false);
  api.named = named;
  assert.equal(await d.sync(), true);
  assert.deepEqual(api.writes, ['create shop']);
});

test('rounds run every resync, at once on a namespace event and on kick(), with backoff after failures', async (t) => {
  const api = new FakeMaps();
  const { d, clock, rotate } = setup(api);
  d.start();
  t.after(() => d.close());
  await clock.advance(0);
  assert.equal(api.watchers.length, 1);

  // A namespace labelled for injection: the watch event starts a round without waiting a resync.
  api.labelled.add('shop');
  api.watchers[0]?.();
  await clock.advance(0);
  assert.deepEqual(api.writes, ['create shop']);

  // A rotated bundle: kick() rewrites it at once.
  rotate(OLD);
  d.kick();
  await clock.advance(0);
  assert.deepEqual(api.writes, ['create shop', 'patch shop']);
  assert.equal(api.maps.get('shop')?.data['ca.crt'], OLD);

  // A ConfigMap edited by hand is repaired by the next periodic round.
  (api.maps.get('shop') as BundleMap).data['ca.crt'] = 'tampered';
  await clock.advance(59_000);
  assert.equal(api.writes.length, 2);
  await clock.advance(1_000);
  assert.equal(api.maps.get('shop')?.data['ca.crt'], OLD);

  // The API down: retried with backoff (1 s, then 2 s, ... at most the resync), then recovered.
  api.failReads = true;
  await clock.advance(60_000);
  assert.ok(
    clock.pending().some((ms) => ms > 0 && ms < 60_000),
    `backoff pending: ${clock.pending().join(',')}`,
  );
  api.failReads = false;
  api.labelled.add('web');
  await clock.advance(2_000);
  assert.ok(api.maps.has('web'));
});
