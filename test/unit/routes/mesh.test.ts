import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MeshRouteTable, type MeshLookup } from '../../../src/routes/mesh.ts';
import { slimHTTPRoute } from '../../../src/routes/objects.ts';
import { req, svc } from './fixtures.ts';

/** An HTTPRoute whose parent is a Service. */
const meshRoute = (
  name: string,
  ns: string,
  parent: { name: string; namespace?: string; port?: number },
  rules: unknown[],
  created = '2026-01-01T00:00:00Z',
) =>
  slimHTTPRoute({
    metadata: { namespace: ns, name, creationTimestamp: created },
    spec: { parentRefs: [{ group: '', kind: 'Service', ...parent }], rules },
  });

const to = (name: string, weight = 1) => ({ ...svc(name, 80), weight });
const shown = (r: MeshLookup): string =>
  r.kind === 'route'
    ? `${r.rule.route}#${r.rule.index}:${r.rule.backends.map((b) => ('target' in b ? b.target.name : 'invalid')).join(',')}`
    : r.kind;

test('producer routes apply to every client of the Service; other Services route as before', () => {
  const t = new MeshRouteTable({
    routes: [
      meshRoute('split', 'shop', { name: 'web' }, [{ backendRefs: [to('web-v1', 90), to('web-v2', 10)] }]),
    ],
  });
  assert.equal(shown(t.lookup('shop/web', 80, 'shop', req('/'))), 'shop/split#0:web-v1,web-v2');
  assert.equal(shown(t.lookup('shop/web', 80, 'other', req('/a'))), 'shop/split#0:web-v1,web-v2');
  assert.equal(shown(t.lookup('shop/cart', 80, 'shop', req('/'))), 'none');
  assert.deepEqual([...t.backends()].sort(), ['shop/web-v1', 'shop/web-v2']);
  assert.equal(t.empty, false);
  assert.equal(new MeshRouteTable({ routes: [] }).empty, true);
});

test("a consumer route is its namespace's own: it replaces the producer's for those clients only", () => {
  const t = new MeshRouteTable({
    routes: [
      meshRoute('producer', 'shop', { name: 'web' }, [{ backendRefs: [to('web-v1')] }]),
      meshRoute('mine', 'ops', { name: 'web', namespace: 'shop' }, [
        { backendRefs: [{ ...to('web-v2'), namespace: 'shop' }] },
      ]),
    ],
  });
  assert.equal(shown(t.lookup('shop/web', 80, 'ops', req('/'))), 'ops/mine#0:web-v2');
  assert.equal(shown(t.lookup('shop/web', 80, 'shop', req('/'))), 'shop/producer#0:web-v1');
  assert.equal(shown(t.lookup('shop/web', 80, 'billing', req('/'))), 'shop/producer#0:web-v1');
});

test('a mesh route needs no ReferenceGrant for a backend in another namespace (its clients may call it anyway)', () => {
  const t = new MeshRouteTable({
    routes: [
      meshRoute('mine', 'ops', { name: 'web', namespace: 'shop' }, [
        { backendRefs: [{ ...to('web-v2'), namespace: 'shop' }] },
      ]),
      meshRoute('elsewhere', 'shop', { name: 'cart' }, [
        { backendRefs: [{ ...to('cart'), namespace: 'billing' }] },
      ]),
    ],
  });
  assert.equal(shown(t.lookup('shop/web', 80, 'ops', req('/'))), 'ops/mine#0:web-v2');
  assert.equal(shown(t.lookup('shop/cart', 80, 'shop', req('/'))), 'shop/elsewhere#0:cart');
  assert.deepEqual([...t.backends()].sort(), ['billing/cart', 'shop/web-v2']);
});

test('a parentRef port limits the route to that Service port', () => {
  const t = new MeshRouteTable({
    routes: [meshRoute('http-only', 'shop', { name: 'web', port: 80 }, [{ backendRefs: [to('web-v2')] }])],
  });
  assert.equal(shown(t.lookup('shop/web', 80, 'shop', req('/'))), 'shop/http-only#0:web-v2');
  assert.equal(shown(t.lookup('shop/web', 8443, 'shop', req('/'))), 'none');
});

test("matches in the spec's precedence; routes that apply and do not match are no_match", () => {
  const t = new MeshRouteTable({
    routes: [
      meshRoute('paths', 'shop', { name: 'web' }, [
        { matches: [{ path: { type: 'PathPrefix', value: '/api' } }], backendRefs: [to('api')] },
        { matches: [{ path: { type: 'Exact', value: '/api/v2' } }], backendRefs: [to('api-v2')] },
        {
          matches: [
            { path: { type: 'PathPrefix', value: '/' }, headers: [{ name: 'x-canary', value: '1' }] },
          ],
          backendRefs: [to('canary')],
        },
      ]),
    ],
  });
  assert.equal(shown(t.lookup('shop/web', 80, 'shop', req('/api/v2'))), 'shop/paths#1:api-v2');
  assert.equal(shown(t.lookup('shop/web', 80, 'shop', req('/api/x'))), 'shop/paths#0:api');
  assert.equal(
    shown(t.lookup('shop/web', 80, 'shop', req('/x', { headers: { 'x-canary': '1' } }))),
    'shop/paths#2:canary',
  );
  assert.equal(shown(t.lookup('shop/web', 80, 'shop', req('/x'))), 'no_match');
});

test('a route with anything unsupported is not applied; Gateway parents are not mesh routes', () => {
  const t = new MeshRouteTable({
    routes: [
      meshRoute('regex', 'shop', { name: 'web' }, [
        { matches: [{ path: { type: 'RegularExpression', value: '/(a+)+$' } }], backendRefs: [to('x')] },
      ]),
      slimHTTPRoute({
        metadata: { namespace: 'shop', name: 'edge' },
        spec: { parentRefs: [{ name: 'web' }], rules: [{ backendRefs: [to('x')] }] },
      }),
    ],
  });
  assert.equal(shown(t.lookup('shop/web', 80, 'shop', req('/'))), 'none');
  assert.equal(t.empty, true);
});
