import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compileGrpcMatch, rpcOfPath } from '../../../src/routes/grpc-match.ts';
import { MeshRouteTable, type MeshLookup } from '../../../src/routes/mesh.ts';
import { slimGRPCRoute, slimHTTPRoute } from '../../../src/routes/objects.ts';
import { req, svc } from './fixtures.ts';

/** A GRPCRoute whose parent is Service `parent` of its namespace. */
const grpcRoute = (
  name: string,
  rules: unknown,
  o: { ns?: string; parent?: Record<string, unknown>; created?: string } = {},
) =>
  slimGRPCRoute({
    metadata: {
      namespace: o.ns ?? 'shop',
      name,
      creationTimestamp: o.created ?? '2026-01-01T00:00:00Z',
    },
    spec: { parentRefs: [{ group: '', kind: 'Service', name: 'rpc', ...o.parent }], rules },
  });

const to = (name: string, weight = 1) => ({ ...svc(name, 9000), weight });
const PATH = '/shop.v1.Cart/Add';

const shown = (r: MeshLookup): string =>
  r.kind === 'route'
    ? `${r.rule.kind} ${r.rule.route}#${r.rule.index}:${r.rule.backends.map((b) => ('target' in b ? b.target.name : 'invalid')).join(',')}`
    : r.kind === 'no_match'
      ? `no_match ${r.routes}`
      : r.kind;

const matchOf = (m: unknown) => {
  const c = compileGrpcMatch(grpcRoute('r', [{ matches: [m] }]).spec.rules[0]!.matches[0]!);
  if ('unsupported' in c) throw new Error(c.unsupported);
  return c.match;
};

test('slimming: defaults as the CRD writes them (Exact, match everything), idempotent, never throws', () => {
  const r = grpcRoute('r', [
    {
      name: 'add',
      matches: [{ method: { service: 'shop.v1.Cart', method: '' }, headers: [{ name: 'X-A', value: '1' }] }],
      filters: [
        { type: 'RequestHeaderModifier', requestHeaderModifier: { set: [{ name: 'a', value: 'b' }] } },
      ],
      backendRefs: [{ name: 'cart', port: 9000 }],
    },
    {},
  ]);
  assert.deepEqual(r.spec.rules[0], {
    name: 'add',
    matches: [
      {
        method: { type: 'Exact', service: 'shop.v1.Cart' },
        headers: [{ type: 'Exact', name: 'X-A', value: '1' }],
      },
    ],
    filters: [
      {
        type: 'RequestHeaderModifier',
        requestHeaderModifier: { set: [{ name: 'a', value: 'b' }], add: [], remove: [] },
      },
    ],
    backendRefs: [{ group: '', kind: 'Service', name: 'cart', port: 9000, weight: 1, filters: [] }],
  });
  assert.deepEqual(r.spec.rules[1], { matches: [{ headers: [] }], filters: [], backendRefs: [] });
  assert.deepEqual(slimGRPCRoute(JSON.parse(JSON.stringify(r))), r);
  for (const junk of [null, 7, 'x', { spec: { rules: 'no' } }, { spec: { rules: [{ matches: [null, 3] }] } }])
    assert.equal(slimGRPCRoute(junk).kind, 'GRPCRoute');
  assert.deepEqual(slimGRPCRoute({}).spec.rules, [
    { matches: [{ headers: [] }], filters: [], backendRefs: [] },
  ]);
});

test('a gRPC path is /service/method, nothing else', () => {
  assert.deepEqual(rpcOfPath(PATH), { service: 'shop.v1.Cart', method: 'Add' });
  for (const p of ['/', '/shop.v1.Cart', '/shop.v1.Cart/', '//Add', '/a/b/c', 'shop.v1.Cart/Add'])
    assert.equal(rpcOfPath(p), undefined, p);
});

test('method matches: service and method exact, service alone, method alone, none; case-sensitive', () => {
  const both = matchOf({ method: { service: 'shop.v1.Cart', method: 'Add' } });
  assert.equal(both.test(req(PATH)), true);
  assert.equal(both.test(req('/shop.v1.Cart/Remove')), false);
  assert.equal(both.test(req('/shop.v1.cart/Add')), false, 'case-sensitive');
  assert.equal(both.test(req('/shop.v1.Cart/Add/x')), false);
  const service = matchOf({ method: { service: 'shop.v1.Cart' } });
  assert.equal(service.test(req('/shop.v1.Cart/Remove')), true);
  assert.equal(service.test(req('/shop.v1.CartX/Remove')), false, 'not a string prefix');
  assert.equal(service.test(req('/shop.v1.Cart')), false);
  const method = matchOf({ method: { method: 'Add' } });
  assert.equal(method.test(req('/shop.v2.Cart/Add')), true);
  assert.equal(method.test(req('/other.Svc/Add')), true);
  assert.equal(method.test(req('/other.Svc/AddAll')), false);
  assert.equal(method.test(req('/Add')), false);
  const any = matchOf({});
  assert.equal(any.test(req('/anything/at/all')), true, 'no method match: every call');
});

test('headers: Exact, names case-insensitive, the first of two entries with one name counts', () => {
  const m = matchOf({
    method: { service: 'shop.v1.Cart' },
    headers: [
      { name: 'X-Version', value: '2' },
      { name: 'x-version', value: '3' },
    ],
  });
  assert.equal(m.test(req(PATH, { headers: { 'x-version': '2' } })), true);
  assert.equal(m.test(req(PATH, { headers: { 'x-version': '3' } })), false);
  assert.equal(m.test(req(PATH)), false);
  assert.deepEqual(m.rank, [-'shop.v1.Cart'.length, 0, -1], 'the repeated name is one header match');
});

test("precedence is GRPCRoute's: service characters, then method characters, then headers, then age and name", () => {
  const t = new MeshRouteTable({
    routes: [],
    grpcRoutes: [
      grpcRoute('a-any', [{ backendRefs: [to('any')] }], { created: '2025-01-01T00:00:00Z' }),
      grpcRoute('b-method', [{ matches: [{ method: { method: 'Add' } }], backendRefs: [to('method')] }]),
      grpcRoute('c-service', [
        { matches: [{ method: { service: 'shop.v1.Cart' } }], backendRefs: [to('service')] },
        {
          matches: [{ method: { service: 'shop.v1.Cart' }, headers: [{ name: 'x-canary', value: '1' }] }],
          backendRefs: [to('service-canary')],
        },
      ]),
      grpcRoute('d-exact', [
        { matches: [{ method: { service: 'shop.v1.Cart', method: 'Add' } }], backendRefs: [to('exact')] },
      ]),
      // Ties with d-exact on every count: the older route wins, then namespace/name.
      grpcRoute(
        'e-exact-newer',
        [{ matches: [{ method: { service: 'shop.v1.Cart', method: 'Add' } }], backendRefs: [to('newer')] }],
        { created: '2026-06-01T00:00:00Z' },
      ),
    ],
  });
  const at = (path: string, headers: Record<string, string> = {}) =>
    shown(t.lookup('shop/rpc', 9000, 'shop', req(path, { method: 'POST', headers })));
  assert.equal(at(PATH), 'GRPCRoute shop/d-exact#0:exact');
  assert.equal(at(PATH, { 'x-canary': '1' }), 'GRPCRoute shop/d-exact#0:exact', 'method characters first');
  assert.equal(at('/shop.v1.Cart/Remove', { 'x-canary': '1' }), 'GRPCRoute shop/c-service#1:service-canary');
  assert.equal(at('/shop.v1.Cart/Remove'), 'GRPCRoute shop/c-service#0:service');
  assert.equal(at('/other.Svc/Add'), 'GRPCRoute shop/b-method#0:method');
  assert.equal(at('/other.Svc/List'), 'GRPCRoute shop/a-any#0:any', 'the oldest route is still last');
});

test('GRPCRoutes on a Service port win over HTTPRoutes there (GEP-1294); none matching is a GRPCRoute no_match', () => {
  const http = slimHTTPRoute({
    metadata: { namespace: 'shop', name: 'web', creationTimestamp: '2020-01-01T00:00:00Z' },
    spec: {
      parentRefs: [{ group: '', kind: 'Service', name: 'rpc' }],
      rules: [{ backendRefs: [to('http')] }],
    },
  });
  const t = new MeshRouteTable({
    routes: [http],
    grpcRoutes: [
      grpcRoute('cart', [{ matches: [{ method: { service: 'shop.v1.Cart' } }], backendRefs: [to('cart')] }], {
        parent: { port: 9000 },
      }),
    ],
  });
  const at = (port: number, path: string) => shown(t.lookup('shop/rpc', port, 'shop', req(path)));
  assert.equal(at(9000, PATH), 'GRPCRoute shop/cart#0:cart');
  assert.equal(at(9000, '/other.Svc/Get'), 'no_match GRPCRoute', 'the HTTPRoute is not merged in');
  assert.equal(at(8080, PATH), 'HTTPRoute shop/web#0:http', 'a port without GRPCRoutes keeps its HTTPRoutes');
});

test("consumer GRPCRoutes replace the producer's for their namespace's callers", () => {
  const t = new MeshRouteTable({
    routes: [],
    grpcRoutes: [
      grpcRoute('producer', [{ backendRefs: [to('rpc-v1')] }]),
      grpcRoute('mine', [{ backendRefs: [{ ...to('rpc-v2'), namespace: 'shop' }] }], {
        ns: 'ops',
        parent: { namespace: 'shop' },
      }),
    ],
  });
  assert.equal(shown(t.lookup('shop/rpc', 9000, 'ops', req(PATH))), 'GRPCRoute ops/mine#0:rpc-v2');
  assert.equal(shown(t.lookup('shop/rpc', 9000, 'shop', req(PATH))), 'GRPCRoute shop/producer#0:rpc-v1');
  assert.deepEqual([...t.backends()].sort(), ['shop/rpc-v1', 'shop/rpc-v2']);
});

test('a GRPCRoute it cannot apply is not applied at all, and is listed with the reason', () => {
  const t = new MeshRouteTable({
    routes: [],
    grpcRoutes: [
      grpcRoute('regex', [
        {
          matches: [{ method: { type: 'RegularExpression', service: 'shop\\..*' } }],
          backendRefs: [to('a')],
        },
      ]),
      grpcRoute('header-regex', [
        {
          matches: [{ headers: [{ type: 'RegularExpression', name: 'x', value: '.*' }] }],
          backendRefs: [to('a')],
        },
      ]),
      grpcRoute('mirror', [
        { filters: [{ type: 'RequestMirror', requestMirror: { backendRef: { name: 'm', port: 1 } } }] },
      ]),
      grpcRoute('empty-method', [{ matches: [{ method: { type: 'Exact' } }], backendRefs: [to('a')] }]),
      // A route attached to no Service is no sidecar's business.
      slimGRPCRoute({
        metadata: { namespace: 'shop', name: 'gateway' },
        spec: { parentRefs: [{ name: 'edge' }], rules: [{ filters: [{ type: 'ExtensionRef' }] }] },
      }),
    ],
  });
  assert.equal(t.empty, true, 'nothing of them applies');
  assert.deepEqual(
    t.rejected().map((r) => `${r.kind} ${r.route}: ${r.reason}`),
    [
      'GRPCRoute shop/regex: rule 0: method match type RegularExpression is not supported',
      'GRPCRoute shop/header-regex: rule 0: RegularExpression match on x is not supported',
      'GRPCRoute shop/mirror: rule 0: filter RequestMirror is not supported',
      'GRPCRoute shop/empty-method: rule 0: a method match that names neither service nor method is not supported',
    ],
  );
});
