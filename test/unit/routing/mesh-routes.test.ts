import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Reflector, ReflectorSink } from '../../../src/discovery/reflector.ts';
import type { MeshRouteTable } from '../../../src/routes/mesh.ts';
import { req } from '../routes/fixtures.ts';
import { MeshRoutes } from '../../../src/routing/mesh-routes.ts';

const parentRefs = [{ group: '', kind: 'Service', name: 'rpc' }];
const grpcRoute = (name: string, backend: string) => ({
  kind: 'GRPCRoute',
  metadata: { namespace: 'shop', name },
  spec: { parentRefs, rules: [{ backendRefs: [{ name: backend, port: 9000 }] }] },
});
const httpRoute = {
  kind: 'HTTPRoute',
  metadata: { namespace: 'shop', name: 'web' },
  spec: {
    parentRefs: [{ ...parentRefs[0], name: 'web' }],
    rules: [{ backendRefs: [{ name: 'web-v2', port: 80 }] }],
  },
};

/** MeshRoutes over sinks the test drives, as the API's reflectors would. */
function meshRoutes(): { routes: MeshRoutes; sinks: Map<string, ReflectorSink>; tables: MeshRouteTable[] } {
  const sinks = new Map<string, ReflectorSink>();
  const tables: MeshRouteTable[] = [];
  const routes = new MeshRoutes(
    (name, _path, _selectors, sink) => {
      sinks.set(name, sink);
      return { start() {}, stop: async () => {} } as unknown as Reflector;
    },
    () => 1_000,
    (t) => tables.push(t),
  );
  return { routes, sinks, tables };
}

const backendOf = (routes: MeshRoutes): string => {
  const r = routes.table().lookup('shop/rpc', 9000, 'shop', req('/a.B/C'));
  return r.kind === 'route' && 'target' in r.rule.backends[0]! ? r.rule.backends[0].target.name : r.kind;
};

test('GRPCRoutes are read as their own collection: a failed or missing one removes nothing, the other still applies', () => {
  const { routes, sinks } = meshRoutes();
  assert.deepEqual([...sinks.keys()], ['httproutes', 'grpcroutes']);
  sinks.get('httproutes')!.replace([httpRoute], {});
  // No GRPCRoute CRD: its list fails (404) and is retried; the HTTPRoutes apply meanwhile.
  sinks.get('grpcroutes')!.failed('404 Not Found');
  assert.equal(routes.table().services(), 1);
  let s = routes.status();
  assert.deepEqual([s.listed, s.httpRoutes, s.grpcRoutes], [false, 1, 0]);
  assert.deepEqual(
    s.stale.map((x) => x.collection),
    ['grpcroutes'],
  );

  sinks.get('grpcroutes')!.replace([grpcRoute('split', 'rpc-v2')], {});
  sinks.get('grpcroutes')!.synced();
  assert.equal(backendOf(routes), 'rpc-v2');
  sinks.get('grpcroutes')!.failed('connection refused');
  assert.equal(backendOf(routes), 'rpc-v2', 'a failure removes no route');
  s = routes.status();
  assert.deepEqual([s.listed, s.grpcRoutes, s.services], [true, 1, 2]);
  sinks.get('grpcroutes')!.event('MODIFIED', grpcRoute('split', 'rpc-v3'));
  assert.equal(backendOf(routes), 'rpc-v3');
});

test('the snapshot keeps both kinds; loaded, they apply and are stale until a list confirms them', () => {
  const first = meshRoutes();
  first.sinks.get('httproutes')!.replace([httpRoute], {});
  first.sinks.get('grpcroutes')!.replace([grpcRoute('split', 'rpc-v2')], {});
  const texts = first.routes.collect();
  assert.equal(texts.length, 2);

  const restarted = meshRoutes();
  restarted.routes.load(texts);
  assert.equal(backendOf(restarted.routes), 'rpc-v2');
  const s = restarted.routes.status();
  assert.deepEqual([s.httpRoutes, s.grpcRoutes], [1, 1]);
  assert.deepEqual(
    s.stale.map((x) => x.collection),
    ['httproutes', 'grpcroutes'],
  );
  assert.equal(restarted.tables.length, 1, 'the load built one table');
});

test('a malformed GRPCRoute is listed as rejected in the status, and nothing of it applies', () => {
  const { routes, sinks } = meshRoutes();
  const bad = grpcRoute('bad', 'rpc-v2');
  (bad.spec.rules[0] as Record<string, unknown>).matches = [
    { method: { type: 'RegularExpression', service: '.*' } },
  ];
  sinks.get('grpcroutes')!.replace([bad, { spec: 'garbage' }], {});
  assert.equal(backendOf(routes), 'none');
  assert.deepEqual(
    routes.status().rejected.map((r) => r.route),
    ['shop/bad'],
  );
});
