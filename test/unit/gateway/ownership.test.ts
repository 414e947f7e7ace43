import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { RouteTable, type TableProblem } from '../../../src/gateway/table.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { FakeKubeApi, status, unavailable, type Fault } from '../../harness/fake-kube-api.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';
import { ingress, rawIngress, type IngressSpecLite } from './ingress-fixtures.ts';
import { apiWithOurClass, ING, openStore, put } from './store-fixtures.ts';

// Host ownership across namespaces: a host belongs to the namespace of the oldest Ingress that
// claims it (rule host or TLS host); what other namespaces declare for it is not served.

const where = (t: RouteTable, host: string, path: string): string =>
  t.lookup(host, path)?.backend.name ?? '404';
const conflicts = (t: RouteTable): NonNullable<TableProblem['conflict']>[] =>
  t.problems.flatMap((p) => (p.conflict ? [p.conflict] : []));

const teamA: IngressSpecLite = {
  name: 'shop',
  namespace: 'team-a',
  created: '2026-01-01T00:00:00Z',
  rules: [
    {
      host: 'shop.example.com',
      paths: [
        { path: '/cart', svc: 'cart' },
        { path: '/api', svc: 'api' },
      ],
    },
  ],
  tls: [{ hosts: ['shop.example.com'], secretName: 'shop-tls' }],
};
const teamB: IngressSpecLite = {
  name: 'takeover',
  namespace: 'team-b',
  created: '2026-02-01T00:00:00Z',
  rules: [
    { host: 'shop.example.com', paths: [{ path: '/public/login', svc: 'phish' }] },
    { host: 'b.example.com', paths: [{ path: '/', svc: 'b-web' }] },
  ],
  defaultBackend: { svc: 'phish-default' },
  tls: [{ hosts: ['shop.example.com', 'b.example.com'], secretName: 'b-tls' }],
};

test("another namespace's paths on a host it does not own are not routed, and are reported as a conflict", () => {
  for (const order of [
    [teamA, teamB],
    [teamB, teamA],
  ]) {
    const t = new RouteTable(order.map(ingress));
    assert.equal(where(t, 'shop.example.com', '/public/login'), '404');
    // Nor does its defaultBackend become the default of the host it does not own.
    assert.equal(where(t, 'shop.example.com', '/elsewhere'), '404');
    assert.equal(where(t, 'shop.example.com', '/cart/1'), 'cart');
    assert.equal(t.tlsFor('shop.example.com')?.secret, 'team-a/shop-tls');
    // Its own host is its own: rules, default and certificate.
    assert.equal(where(t, 'b.example.com', '/x'), 'b-web');
    assert.equal(t.tlsFor('b.example.com')?.secret, 'team-b/b-tls');
    assert.deepEqual(conflicts(t), [
      { kind: 'host', host: 'shop.example.com', winner: 'team-a/shop', owner: 'team-a' },
    ]);
    const p = t.problems.find((x) => x.conflict);
    assert.equal(p?.ingress, 'team-b/takeover');
    assert.match(p?.message ?? '', /shop\.example\.com belongs to namespace team-a/);
    assert.equal(t.routes, 3);
  }
});

test('the oldest claim decides, whatever kind: a TLS host alone claims it; ties go to namespace/name', () => {
  const tlsOnly = ingress({
    name: 'cert',
    namespace: 'team-c',
    created: '2025-12-01T00:00:00Z',
    tls: [{ hosts: ['shop.example.com'], secretName: 'c-tls' }],
  });
  const t = new RouteTable([ingress(teamA), tlsOnly]);
  assert.equal(where(t, 'shop.example.com', '/cart'), '404');
  assert.equal(t.tlsFor('shop.example.com')?.secret, 'team-c/c-tls');
  assert.deepEqual(
    conflicts(t).map((c) => [c.kind, c.host, c.owner]),
    [['host', 'shop.example.com', 'team-c']],
  );
  const same = '2026-01-01T00:00:00Z';
  const z = ingress({ ...teamB, namespace: 'zeta', created: same });
  const a = ingress({ ...teamB, namespace: 'alpha', created: same });
  for (const order of [
    [z, a],
    [a, z],
  ])
    assert.equal(
      new RouteTable(order).lookup('shop.example.com', '/public/login')?.backend.namespace,
      'alpha',
    );
});

test('the same input always gives the same table and the same conflicts', () => {
  const ings = [teamB, teamA, { ...teamB, name: 'again', created: '2026-03-01T00:00:00Z' }].map(ingress);
  const first = new RouteTable(ings);
  for (let i = 0; i < 5; i++) {
    const t = new RouteTable([...ings].reverse());
    assert.deepEqual(t.problems, first.problems);
    assert.equal(t.routes, first.routes);
  }
});

test('within the owning namespace, the same host, path and type from two Ingresses: the oldest wins, reported', () => {
  const t = new RouteTable([
    ingress({
      ...teamA,
      name: 'shop-v2',
      created: '2026-03-01T00:00:00Z',
      rules: [
        {
          host: 'shop.example.com',
          paths: [
            { path: '/cart', svc: 'cart-v2' },
            { path: '/new', svc: 'new' },
          ],
        },
      ],
      tls: [],
    }),
    ingress(teamA),
  ]);
  assert.equal(where(t, 'shop.example.com', '/cart'), 'cart');
  assert.equal(where(t, 'shop.example.com', '/new'), 'new');
  assert.deepEqual(conflicts(t), [
    {
      kind: 'path',
      host: 'shop.example.com',
      path: '/cart',
      pathType: 'Prefix',
      winner: 'team-a/shop',
      owner: 'team-a',
    },
  ]);
  assert.equal(t.problems[0]?.ingress, 'team-a/shop-v2');
});

test('within the owning namespace, two Secrets for one host: the oldest Ingress keeps it, reported', () => {
  const t = new RouteTable([
    ingress({
      ...teamA,
      name: 'shop-v2',
      created: '2026-03-01T00:00:00Z',
      tls: [{ hosts: ['shop.example.com'], secretName: 'v2-tls' }],
    }),
    ingress(teamA),
  ]);
  assert.equal(t.tlsFor('shop.example.com')?.secret, 'team-a/shop-tls');
  assert.deepEqual(
    conflicts(t).map((c) => [c.kind, c.host, c.winner]),
    [
      ['path', 'shop.example.com', 'team-a/shop'],
      ['path', 'shop.example.com', 'team-a/shop'],
      ['tls', 'shop.example.com', 'team-a/shop'],
    ],
  );
});

test('the catch-all (rules without host, defaultBackend-only Ingresses) is owned like a host', () => {
  const t = new RouteTable([
    ingress({
      name: 'fallback',
      namespace: 'edge',
      created: '2026-01-01T00:00:00Z',
      defaultBackend: { svc: 'sorry' },
    }),
    ingress({
      name: 'grab',
      namespace: 'team-b',
      created: '2026-02-01T00:00:00Z',
      rules: [{ paths: [{ path: '/login', svc: 'phish' }] }],
    }),
    ingress({
      name: 'grab-default',
      namespace: 'team-b',
      created: '2026-02-02T00:00:00Z',
      defaultBackend: { svc: 'phish-default' },
    }),
  ]);
  assert.equal(where(t, 'unknown.example', '/login'), 'sorry');
  assert.equal(where(t, '10.0.0.1', '/'), 'sorry');
  assert.deepEqual(
    conflicts(t).map((c) => [c.kind, c.host, c.owner]),
    [
      ['host', '', 'edge'],
      ['host', '', 'edge'],
    ],
  );
});

test('a wildcard and an exact host are different names: each has its own owner', () => {
  const t = new RouteTable([
    ingress({
      name: 'wild',
      namespace: 'team-a',
      rules: [{ host: '*.example.com', paths: [{ path: '/', svc: 'a' }] }],
    }),
    ingress({
      name: 'api',
      namespace: 'team-b',
      created: '2026-02-01T00:00:00Z',
      rules: [{ host: 'api.example.com', paths: [{ path: '/', svc: 'b' }] }],
    }),
  ]);
  assert.equal(where(t, 'api.example.com', '/'), 'b');
  assert.equal(where(t, 'www.example.com', '/'), 'a');
  assert.deepEqual(conflicts(t), []);
});

// The store: the decision is logged once per change, survives resyncs and an API outage, and moves
// only when the API confirms the owner's Ingress is gone.

test('a conflict is logged once, kept through relists and an outage, and resolved when the owner leaves', async () => {
  const api = apiWithOurClass();
  put(api, ING, rawIngress(teamA));
  put(api, ING, rawIngress(teamB));
  const clock = new FakeClock();
  const log = memoryLogger();
  const store = await openStore(api, clock, { logger: log, reflector: { listTimeoutMs: 5_000 } });
  await clock.advance(0);
  await clock.advance(0);
  const conflictLines = () => log.lines.filter((l) => l.msg === 'Ingress rule not served: conflict');
  const phished = () => store.table().lookup('shop.example.com', '/public/login')?.backend.name ?? '404';
  assert.equal(phished(), '404');
  assert.equal(conflictLines().length, 1);
  assert.equal(store.status().conflicts, 1);
  // Status is published only for Ingresses the gateway serves something of (both here).
  assert.deepEqual(
    store
      .served()
      .map((i) => i.metadata.name)
      .sort(),
    ['shop', 'takeover'],
  );
  // Relists that succeed, then relists that fail (500, reset, stall): the same decision throughout.
  for (const f of [undefined, status(500), unavailable('read ECONNRESET'), 'stall' as const]) {
    api.fault = (op): Fault => (op === 'list' ? f : undefined);
    api.sendError(410);
    for (let t = 0; t < 20; t++) {
      await clock.advance(1_000);
      assert.equal(phished(), '404', `during ${String(f)}`);
      assert.equal(store.table().tlsFor('shop.example.com')?.secret, 'team-a/shop-tls');
    }
    // The failing relists are an outage the store knows of: it serves last-known-good, marked stale.
    assert.equal(store.stale(), f !== undefined, `stale during ${String(f)}`);
  }
  api.fault = () => undefined;
  for (let t = 0; t < 40 && store.stale(); t++) await clock.advance(1_000);
  assert.equal(store.stale(), false);
  assert.equal(conflictLines().length, 1, 'logged once, not per relist');
  // The owner's Ingress deleted (a watch event the API sent): the host passes to the next claim.
  api.remove(ING, 'shop');
  await clock.advance(0);
  assert.equal(phished(), 'phish');
  assert.equal(store.status().conflicts, 0);
  assert.equal(log.lines.filter((l) => l.msg === 'Ingress conflict resolved').length, 1);
  await store.close();
});

test('an Ingress refused as a whole (every host it claims is owned elsewhere) gets no status address', async () => {
  const api = apiWithOurClass();
  put(api, ING, rawIngress(teamA));
  put(api, ING, rawIngress({ ...teamB, rules: teamB.rules?.slice(0, 1), tls: [] }));
  const clock = new FakeClock();
  const store = await openStore(api, clock);
  await clock.advance(0);
  await clock.advance(0);
  assert.deepEqual(
    store.served().map((i) => i.metadata.name),
    ['shop'],
  );
  assert.equal(store.status().servedIngresses, 1);
  await store.close();
});

test('restarted during an outage, the gateway keeps the owner it had (creation times come from the snapshot)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-own-'));
  const snapshotPath = join(dir, 'gateway.snap');
  const open = async (api: FakeKubeApi, clock: FakeClock) => {
    const store = await openStore(api, clock, { snapshotPath, snapshotDebounceMs: 10 });
    await clock.advance(0);
    await clock.advance(0);
    return store;
  };
  try {
    const api = apiWithOurClass();
    // Listed newest first: the API's order is not the age order.
    put(api, ING, rawIngress(teamB));
    put(api, ING, rawIngress(teamA));
    const clock = new FakeClock();
    const first = await open(api, clock);
    assert.equal(first.table().lookup('shop.example.com', '/public/login'), undefined);
    await first.flushSnapshot();
    await first.close();
    const down = new FakeKubeApi();
    down.fault = (): Fault => unavailable('connect ECONNREFUSED');
    const again = await open(down, clock);
    assert.equal(again.stale(), true);
    assert.equal(again.table().lookup('shop.example.com', '/public/login'), undefined);
    assert.equal(again.table().lookup('shop.example.com', '/cart')?.backend.name, 'cart');
    assert.deepEqual(
      again
        .table()
        .conflicts()
        .map((p) => p.ingress),
      ['team-b/takeover'],
    );
    await again.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
