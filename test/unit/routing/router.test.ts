import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeResolver } from '../../harness/fake-resolver.ts';
import type { Endpoint } from '../../../src/discovery/types.ts';
import { inZone, Router } from '../../../src/routing/router.ts';
import { ep, service } from './fixtures.ts';

function setup() {
  const resolver = new FakeResolver();
  const router = new Router({ resolver, namespace: 'own', clusterDomain: 'cluster.local', waitMs: 0 });
  return { resolver, router };
}

test('a Service name routes to the endpoints of the matching port, by port name', async () => {
  const { resolver, router } = setup();
  resolver.set(
    service('prod', 'web', {
      ports: [
        { name: 'http', port: 80, protocol: 'TCP' },
        { name: 'admin', port: 9000, protocol: 'TCP' },
      ],
      eps: { http: [ep('10.0.0.1', 8080)], admin: [ep('10.0.0.1', 9090)] },
    }),
  );
  const r = await router.route({ host: 'web.prod', defaultPort: 80 });
  assert.equal(r.kind, 'service');
  assert.equal(r.kind === 'service' && r.endpoints[0]?.port, 8080);
  const admin = await router.route({ host: 'web.prod.svc.cluster.local', port: 9000, defaultPort: 80 });
  assert.equal(admin.kind === 'service' && admin.endpoints[0]?.port, 9090);
  assert.equal(admin.kind === 'service' && admin.serviceKey, 'prod/web');
});

test('short names use the own namespace', async () => {
  const { resolver, router } = setup();
  resolver.set(service('own', 'web'));
  assert.equal((await router.route({ host: 'web', defaultPort: 80 })).kind, 'service');
});

test('ClusterIP:port routes through the ClusterIP index', async () => {
  const { resolver, router } = setup();
  resolver.set(service('prod', 'web', { clusterIPs: ['10.96.0.7'] }));
  const r = await router.route({ host: '10.96.0.7', port: 80, defaultPort: 80 });
  assert.equal(r.kind === 'service' && r.serviceKey, 'prod/web');
  const other = await router.route({ host: '10.1.2.3', port: 80, defaultPort: 80 });
  assert.deepEqual(other, { kind: 'passthrough', host: '10.1.2.3', port: 80, reason: 'not_a_service' });
});

test('unknown, absent, ExternalName and unknown ports pass through with a reason', async () => {
  const { resolver, router } = setup();
  resolver.absent.add('prod/gone');
  resolver.set(service('prod', 'ext', { type: 'ExternalName', externalName: 'api.example.com', eps: {} }));
  resolver.set(service('prod', 'web'));
  const reason = async (host: string, port?: number) => {
    const r = await router.route({ host, defaultPort: 80, ...(port ? { port } : {}) });
    return r.kind === 'passthrough' ? r.reason : r.kind;
  };
  assert.equal(await reason('gone.prod'), 'not_a_service');
  assert.equal(await reason('never.prod'), 'no_discovery_data');
  assert.equal(await reason('example.com.au.x.y'), 'not_a_service');
  assert.equal(await reason('ext.prod'), 'external_name');
  assert.equal(await reason('web.prod', 81), 'unknown_port');
  const ext = await router.route({ host: 'ext.prod', port: 443, defaultPort: 80 });
  assert.equal(ext.kind === 'passthrough' && `${ext.host}:${ext.port}`, 'api.example.com:443');
});

test('zero ready endpoints is a known Service with an empty list; stale data is flagged', async () => {
  const { resolver, router } = setup();
  resolver.set(service('prod', 'empty', { eps: { http: [] } }), true);
  const r = await router.route({ host: 'empty.prod', defaultPort: 80 });
  assert.equal(r.kind, 'service');
  assert.equal(r.kind === 'service' && r.endpoints.length, 0);
  assert.equal(r.kind === 'service' && r.stale, true);
});

test('a headless hostname selects that one endpoint', async () => {
  const { resolver, router } = setup();
  resolver.set(
    service('prod', 'db', {
      headless: true,
      eps: { http: [ep('10.0.0.1', 5432, { hostname: 'db-0' }), ep('10.0.0.2', 5432, { hostname: 'db-1' })] },
    }),
  );
  const r = await router.route({ host: 'db-1.db.prod.svc.cluster.local', defaultPort: 80 });
  assert.deepEqual(r.kind === 'service' && r.endpoints.map((e) => e.address), ['10.0.0.2']);
});

test('internalTrafficPolicy: Local keeps the endpoints on this node only, with no failover', async () => {
  const resolver = new FakeResolver();
  const onNode = (nodeName?: string) =>
    new Router({
      resolver,
      namespace: 'own',
      clusterDomain: 'cluster.local',
      waitMs: 0,
      ...(nodeName ? { nodeName } : {}),
    });
  const eps = { http: [ep('10.0.0.1', 8080, { nodeName: 'a' }), ep('10.0.0.2', 8080, { nodeName: 'b' })] };
  resolver.set(service('prod', 'local', { internalTrafficPolicy: 'Local', eps }));
  resolver.set(service('prod', 'cluster', { eps }));
  const addresses = async (router: Router, host: string) => {
    const r = await router.route({ host, defaultPort: 80 });
    assert.equal(r.kind, 'service');
    return r.kind === 'service' ? { eps: r.endpoints.map((e) => e.address), localTo: r.localTo } : undefined;
  };
  assert.deepEqual(await addresses(onNode('a'), 'local.prod'), { eps: ['10.0.0.1'], localTo: 'a' });
  assert.deepEqual(await addresses(onNode('c'), 'local.prod'), { eps: [], localTo: 'c' });
  assert.deepEqual(await addresses(onNode('a'), 'cluster.prod'), {
    eps: ['10.0.0.1', '10.0.0.2'],
    localTo: undefined,
  });
  // A sidecar that does not know its node cannot apply the policy and uses every endpoint.
  assert.deepEqual(await addresses(onNode(), 'local.prod'), {
    eps: ['10.0.0.1', '10.0.0.2'],
    localTo: undefined,
  });
});

test('topology hints narrow to this zone only when every ready endpoint has hints and one is ours', () => {
  const hinted = (address: string, ...forZones: string[]) => ep(address, 8080, { forZones });
  const a = hinted('10.0.0.1', 'zone-a');
  const b = hinted('10.0.0.2', 'zone-b');
  const addresses = (eps: Endpoint[]) => eps.map((e) => e.address);
  assert.deepEqual(addresses(inZone([a, b], 'zone-a')), ['10.0.0.1']);
  assert.deepEqual(addresses(inZone([a, hinted('10.0.0.3', 'zone-a', 'zone-b')], 'zone-b')), ['10.0.0.3']);
  // No endpoint for our zone, an endpoint without hints, or an unknown zone: every endpoint.
  assert.deepEqual(addresses(inZone([a, b], 'zone-c')), ['10.0.0.1', '10.0.0.2']);
  assert.deepEqual(addresses(inZone([a, ep('10.0.0.4', 8080)], 'zone-a')), ['10.0.0.1', '10.0.0.4']);
  assert.deepEqual(addresses(inZone([a, b], undefined)), ['10.0.0.1', '10.0.0.2']);
  // Only ready endpoints count (kube-proxy's canUseTopology); the terminating fallback is left alone.
  const terminating = { ...hinted('10.0.0.5'), ready: false, terminating: true };
  assert.deepEqual(addresses(inZone([a, b, terminating], 'zone-b')), ['10.0.0.2']);
});

test('the router applies zone hints, but internalTrafficPolicy: Local wins over them', async () => {
  const resolver = new FakeResolver();
  const router = new Router({
    resolver,
    namespace: 'own',
    clusterDomain: 'cluster.local',
    waitMs: 0,
    nodeName: 'n1',
    zone: 'zone-b',
  });
  const eps = [
    ep('10.0.0.1', 8080, { forZones: ['zone-a'], nodeName: 'n1' }),
    ep('10.0.0.2', 8080, { forZones: ['zone-b'], nodeName: 'n2' }),
  ];
  resolver.set(service('prod', 'hinted', { eps: { http: eps } }));
  resolver.set(service('prod', 'local', { internalTrafficPolicy: 'Local', eps: { http: eps } }));
  const first = async (host: string) => {
    const r = await router.route({ host, defaultPort: 80 });
    return r.kind === 'service' ? r.endpoints.map((e) => e.address) : [];
  };
  assert.deepEqual(await first('hinted.prod'), ['10.0.0.2']);
  assert.deepEqual(await first('local.prod'), ['10.0.0.1']);
});

test('a kept route follows the data: staleness, a replaced Service, and an unknown port keeps its own host', () => {
  const { resolver, router } = setup();
  const v1 = service('ns', 'web', { eps: { http: [ep('10.0.0.1', 80)] } });
  resolver.set(v1);
  const first = router.routeNow({ host: 'web.ns', defaultPort: 80 });
  assert.equal(first?.kind === 'service' && first.stale, false);
  assert.equal(router.routeNow({ host: 'web.ns.svc', defaultPort: 80 }), first, 'kept for the same data');
  resolver.set(v1, true);
  const stale = router.routeNow({ host: 'web.ns', defaultPort: 80 });
  assert.equal(stale?.kind === 'service' && stale.stale, true);
  resolver.set(service('ns', 'web', { eps: { http: [ep('10.0.0.2', 80)] } }));
  const replaced = router.routeNow({ host: 'web.ns', defaultPort: 80 });
  assert.deepEqual(replaced?.kind === 'service' && replaced.endpoints.map((e) => e.address), ['10.0.0.2']);
  for (const host of ['web.ns', 'web.ns.svc.cluster.local']) {
    const r = router.routeNow({ host, port: 9, defaultPort: 80 });
    assert.equal(r?.kind === 'passthrough' && r.reason === 'unknown_port' && r.host, host);
  }
});
