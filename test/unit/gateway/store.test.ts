import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FakeKubeApi, status, unavailable, type Fault } from '../../harness/fake-kube-api.ts';
import { CONTROLLER } from '../../../src/gateway/classes.ts';
import { type GatewayStore } from '../../../src/gateway/store.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';
import { rawIngress } from './ingress-fixtures.ts';
import { selfSigned, tlsSecretObject } from '../../harness/tls-certs.ts';
import { CLS, ING, openStore, put } from './store-fixtures.ts';
import { gateway, gatewayClass, httpListener, route, svc } from '../routes/fixtures.ts';

const SECRETS = (ns: string) => `/api/v1/namespaces/${ns}/secrets`;
const pem = selfSigned('a.example.com');

function seed(api: FakeKubeApi, n = 10): void {
  put(api, CLS, { metadata: { name: 'outrigger' }, spec: { controller: CONTROLLER } });
  put(api, CLS, { metadata: { name: 'nginx' }, spec: { controller: 'k8s.io/ingress-nginx' } });
  for (let i = 0; i < n; i++)
    put(
      api,
      ING,
      rawIngress({
        name: `ing-${i}`,
        namespace: 'shop',
        rules: [{ host: `h${i}.example.com`, paths: [{ path: '/', svc: `svc-${i}` }] }],
        ...(i === 0 ? { tls: [{ hosts: ['h0.example.com'], secretName: 'h0-tls' }] } : {}),
      }),
    );
  put(
    api,
    ING,
    rawIngress({
      name: 'other-class',
      className: 'nginx',
      rules: [{ host: 'x.com', paths: [{ path: '/', svc: 'x' }] }],
    }),
  );
  put(api, SECRETS('shop'), tlsSecretObject('shop', 'h0-tls', pem));
  put(api, SECRETS('shop'), tlsSecretObject('shop', 'unrelated', pem));
}

async function start(api: FakeKubeApi, clock: FakeClock, snapshotPath?: string, namespace?: string) {
  const log = memoryLogger();
  const store = await openStore(api, clock, {
    logger: log,
    ...(snapshotPath ? { snapshotPath, snapshotDebounceMs: 10 } : {}),
    ...(namespace ? { namespace } : {}),
    reflector: { listTimeoutMs: 5_000 },
  });
  await clock.advance(0);
  await clock.advance(0);
  return { store, log };
}

const served = (s: GatewayStore, n = 10): string[] => {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(s.table().lookup(`h${i}.example.com`, '/')?.backend.name ?? '404');
  return out;
};
const all = (n = 10) => Array.from({ length: n }, (_, i) => `svc-${i}`);

test('routes from the Ingresses of our class; only the named TLS Secret is watched, by name', async () => {
  const api = new FakeKubeApi();
  seed(api);
  const clock = new FakeClock();
  const { store } = await start(api, clock);
  assert.equal(store.ready(), true);
  assert.deepEqual(served(store), all());
  assert.equal(store.table().lookup('x.com', '/'), undefined);
  const secretCalls = api.calls.filter((c) => c.path === SECRETS('shop'));
  assert.ok(secretCalls.length > 0);
  assert.ok(secretCalls.every((c) => c.query.fieldSelector === 'metadata.name=h0-tls'));
  assert.deepEqual([...store.secrets().keys()], ['shop/h0-tls']);
  // A change is applied from the watch at once.
  put(
    api,
    ING,
    rawIngress({
      name: 'late',
      namespace: 'shop',
      rules: [{ host: 'late.com', paths: [{ path: '/', svc: 'late' }] }],
    }),
  );
  await clock.advance(0);
  assert.equal(store.table().lookup('late.com', '/')?.backend.name, 'late');
  // Removing the TLS entry stops watching the Secret (an API-confirmed change, not an error).
  put(
    api,
    ING,
    rawIngress({
      name: 'ing-0',
      namespace: 'shop',
      rules: [{ host: 'h0.example.com', paths: [{ path: '/', svc: 'svc-0' }] }],
    }),
  );
  await clock.advance(0);
  assert.deepEqual([...store.secrets().keys()], []);
  await store.close();
});

test('the Skipper scenario: 410 mid-watch, then failing relists (500, reset, stall, 403): no route or certificate removed', async () => {
  const api = new FakeKubeApi();
  seed(api);
  const clock = new FakeClock();
  const { store, log } = await start(api, clock);
  for (const f of [status(500), unavailable('read ECONNRESET'), 'stall' as const, status(403)]) {
    let failing = true;
    api.fault = (op): Fault => (failing && op === 'list' ? f : undefined);
    api.sendError(410);
    for (let t = 0; t < 40; t++) {
      await clock.advance(1_000);
      assert.deepEqual(served(store), all(), `after ${String(f)}`);
      assert.equal(store.secrets().size, 1);
    }
    assert.equal(store.stale(), true);
    failing = false;
    for (let t = 0; t < 40 && store.stale(); t++) await clock.advance(1_000);
    assert.equal(store.stale(), false, `fresh again after ${String(f)}`);
  }
  assert.ok(log.lines.some((l) => l.msg === 'list/watch failed; keeping last-known-good and retrying'));
  // A 410 followed by a successful relist that really lacks an Ingress does remove it.
  api.remove(ING, 'ing-9');
  api.sendError(410);
  for (let t = 0; t < 5; t++) await clock.advance(1_000);
  assert.deepEqual(served(store), [...all(9), '404']);
  await store.close();
});

test('restart during an outage: every route and certificate from the snapshot (0600), stale until confirmed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-snap-'));
  const path = join(dir, 'gateway.snap');
  try {
    const api = new FakeKubeApi();
    seed(api);
    const clock = new FakeClock();
    const first = await start(api, clock, path);
    await first.store.flushSnapshot();
    await first.store.close();
    assert.equal(statSync(path).mode & 0o777, 0o600);

    const down = new FakeKubeApi();
    down.fault = (): Fault => unavailable('connect ECONNREFUSED');
    const { store, log } = await start(down, clock, path);
    assert.equal(store.ready(), true);
    assert.equal(store.stale(), true);
    assert.deepEqual(served(store), all());
    assert.equal(store.secrets().get('shop/h0-tls')?.key, pem.key);
    assert.equal(store.table().tlsFor('h0.example.com')?.secret, 'shop/h0-tls');
    assert.ok(
      log.lines.some(
        (l) => l.msg === 'gateway snapshot loaded; serving it as stale until the API confirms it',
      ),
    );
    await store.close();

    // The API back, with one Ingress changed: the snapshot is replaced by the complete lists.
    put(
      api,
      ING,
      rawIngress({
        name: 'ing-1',
        namespace: 'shop',
        rules: [{ host: 'h1.example.com', paths: [{ path: '/', svc: 'changed' }] }],
      }),
    );
    const back = await start(api, clock, path);
    for (let t = 0; t < 5 && back.store.stale(); t++) await clock.advance(1_000);
    assert.equal(back.store.stale(), false);
    assert.equal(back.store.table().lookup('h1.example.com', '/')?.backend.name, 'changed');
    await back.store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a corrupt snapshot is ignored with one warning; the gateway is not ready until a list', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-snap-'));
  const path = join(dir, 'gateway.snap');
  try {
    writeFileSync(path, 'ORSNAP1\nnot really');
    const down = new FakeKubeApi();
    down.fault = (): Fault => unavailable();
    const clock = new FakeClock();
    const { store, log } = await start(down, clock, path);
    assert.equal(store.ready(), false);
    assert.equal(log.lines.filter((l) => l.msg === 'snapshot ignored').length, 1);
    await store.close();
    assert.ok(readFileSync(path).length > 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--watch-namespace reads that namespace only; a Secret that is not kubernetes.io/tls is not served', async () => {
  const api = new FakeKubeApi();
  const NS_ING = '/apis/networking.k8s.io/v1/namespaces/shop/ingresses';
  put(api, CLS, { metadata: { name: 'outrigger' }, spec: { controller: CONTROLLER } });
  put(
    api,
    NS_ING,
    rawIngress({
      name: 'web',
      namespace: 'shop',
      rules: [{ host: 'web.com', paths: [{ path: '/', svc: 'web' }] }],
      tls: [{ hosts: ['web.com'], secretName: 'opaque' }],
    }),
  );
  put(api, SECRETS('shop'), { ...tlsSecretObject('shop', 'opaque', pem), type: 'Opaque' });
  const { store } = await start(api, new FakeClock(), undefined, 'shop');
  assert.ok(api.calls.some((c) => c.path === NS_ING));
  assert.ok(!api.calls.some((c) => c.path === ING));
  assert.equal(store.table().lookup('web.com', '/')?.backend.name, 'web');
  assert.equal(store.table().tlsFor('web.com')?.secret, 'shop/opaque');
  assert.equal(store.secrets().size, 0);
  await store.close();
});

test("a status write's echo rebuilds no table; a change rebuilds only the table of its objects", async () => {
  const api = new FakeKubeApi();
  seed(api, 2);
  const GW = '/apis/gateway.networking.k8s.io/v1';
  put(api, `${GW}/gatewayclasses`, gatewayClass());
  put(api, `${GW}/gateways`, gateway([httpListener()]));
  put(api, `${GW}/httproutes`, route('r', { hostnames: ['r.com'], rules: [{ backendRefs: [svc('r')] }] }));
  put(api, '/api/v1/namespaces', { metadata: { name: 'shop', labels: { team: 'a' } } });
  const clock = new FakeClock();
  let rebuilt = 0;
  const store = await openStore(api, clock, { gatewayApi: true, onTable: () => rebuilt++ });
  await clock.advance(0);
  await clock.advance(0);
  const ingresses = store.table();
  const routes = store.routeTable();
  assert.equal(routes.routes().size, 1);
  const settled = rebuilt;

  await api.mergePatch('/apis/networking.k8s.io/v1/namespaces/shop/ingresses/ing-0/status', {
    status: { loadBalancer: { ingress: [{ ip: '192.0.2.1' }] } },
  });
  const accepted = { conditions: [{ type: 'Accepted', status: 'True', reason: 'Accepted' }] };
  await api.mergePatch(`${GW}/namespaces/shop/httproutes/r/status`, { status: { parents: [] } });
  await api.mergePatch(`${GW}/gatewayclasses/outrigger/status`, { status: accepted });
  // A Namespace change the route table does not read (not a label).
  put(api, '/api/v1/namespaces', {
    metadata: { name: 'shop', labels: { team: 'a' } },
    status: { phase: 'x' },
  });
  await clock.advance(0);
  assert.equal(rebuilt, settled, 'no rebuild for status-only changes');
  assert.equal(store.table(), ingresses);
  assert.equal(store.routeTable(), routes);
  // The status writers compare with the status as last read, not the tables' copies.
  assert.deepEqual(store.served().find((i) => i.metadata.name === 'ing-0')?.status?.addresses, ['192.0.2.1']);
  assert.deepEqual(store.routeStatusOf('GatewayClass', { namespace: '', name: 'outrigger' }), accepted);

  put(
    api,
    ING,
    rawIngress({
      name: 'ing-1',
      namespace: 'shop',
      rules: [{ host: 'new.com', paths: [{ path: '/', svc: 'n' }] }],
    }),
  );
  await clock.advance(0);
  assert.equal(rebuilt, settled + 1);
  assert.notEqual(store.table(), ingresses);
  assert.equal(store.routeTable(), routes, 'an Ingress change leaves the route table as it was');
  const nowIngresses = store.table();
  put(api, '/api/v1/namespaces', { metadata: { name: 'shop', labels: { team: 'b' } } });
  await clock.advance(0);
  assert.equal(rebuilt, settled + 2);
  assert.notEqual(store.routeTable(), routes);
  assert.equal(store.table(), nowIngresses, 'a label change leaves the Ingress table as it was');
  await store.close();
});
