import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { routeCall, type EgressRoutes } from '../../../src/proxy/egress-routes.ts';
import { MeshRouteTable } from '../../../src/routes/mesh.ts';
import { GrpcStatus } from '../../../src/proxy/h2/grpc.ts';
import { slimGRPCRoute, slimHTTPRoute } from '../../../src/routes/objects.ts';

const route = (rules: unknown[]) =>
  slimHTTPRoute({
    metadata: { namespace: 'shop', name: 'web', creationTimestamp: '2026-01-01T00:00:00Z' },
    spec: { parentRefs: [{ group: '', kind: 'Service', name: 'web', port: 80 }], rules },
  });
const to = (name: string, weight = 1) => ({ name, port: 8080, weight });

function routes(rules: unknown[], draw = 0): EgressRoutes {
  const table = new MeshRouteTable({ routes: [route(rules)] });
  return { table: () => table, namespace: 'shop', clusterDomain: 'cluster.local', random: () => draw };
}

const call = (url: string, headers: Record<string, string> = {}) =>
  ({ method: 'GET', url, headers: { host: 'web', ...headers } }) as unknown as IncomingMessage;

test('a call to a routed Service port goes to the backend drawn by weight, on its cluster name', () => {
  const r = routes([{ backendRefs: [to('web-v1', 1), to('web-v2', 3)] }], 0.5);
  const step = routeCall(r, 'shop/web', 80, call('/a?b=1'));
  assert.equal(step.kind, 'routed');
  assert.deepEqual(step.kind === 'routed' && step.dest, {
    host: 'web-v2.shop.svc.cluster.local',
    port: 8080,
    defaultPort: 8080,
  });
  assert.equal(routeCall(r, 'shop/web', 81, call('/')).kind, 'as_is', 'the route names port 80 only');
  assert.equal(routeCall(r, 'shop/cart', 80, call('/')).kind, 'as_is', 'another Service');
});

test('filters edit the request after the sidecar, on the normalised path; timeouts reach the plan', () => {
  const r = routes([
    {
      matches: [{ path: { type: 'PathPrefix', value: '/legacy' } }],
      filters: [
        {
          type: 'URLRewrite',
          urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/v2' } },
        },
        {
          type: 'RequestHeaderModifier',
          requestHeaderModifier: { set: [{ name: 'x-route', value: 'legacy' }] },
        },
      ],
      backendRefs: [to('web-v1')],
      timeouts: { request: '2s', backendRequest: '500ms' },
    },
  ]);
  const step = routeCall(r, 'shop/web', 80, call('/public/../legacy/%69tem?x=1'));
  assert.ok(step.kind === 'routed', JSON.stringify(step));
  const upstream = {
    url: '/public/../legacy/%69tem?x=1',
    headers: { host: 'web' } as Record<string, string>,
  };
  step.edit(upstream);
  assert.deepEqual(upstream, { url: '/v2/item?x=1', headers: { host: 'web', 'x-route': 'legacy' } });
  assert.deepEqual([step.requestTimeoutMs, step.attemptTimeoutMs], [2_000, 500]);
});

test('routes apply and none matches: 404 no_route; an ambiguous path: 400; a redirect is answered', () => {
  const r = routes([
    { matches: [{ path: { type: 'Exact', value: '/only' } }], backendRefs: [to('web-v1')] },
    {
      matches: [{ path: { type: 'Exact', value: '/old' } }],
      filters: [
        {
          type: 'RequestRedirect',
          requestRedirect: { path: { type: 'ReplaceFullPath', replaceFullPath: '/new' } },
        },
      ],
    },
  ]);
  assert.deepEqual(routeCall(r, 'shop/web', 80, call('/other')), {
    kind: 'error',
    code: 'no_route',
    detail: 'no HTTPRoute rule for shop/web matches /other',
  });
  const ambiguous = routeCall(r, 'shop/web', 80, call('/a%2Fb'));
  assert.equal(ambiguous.kind === 'error' ? ambiguous.code : ambiguous.kind, 'bad_request');
  assert.deepEqual(routeCall(r, 'shop/web', 80, call('/old')), {
    kind: 'redirect',
    status: 302,
    location: 'http://web/new',
  });
});

test('a GRPCRoute on the port: its method match and weights; an invalid backend is UNAVAILABLE, no match UNIMPLEMENTED', () => {
  const grpc = slimGRPCRoute({
    metadata: { namespace: 'shop', name: 'rpc' },
    spec: {
      parentRefs: [{ group: '', kind: 'Service', name: 'web', port: 80 }],
      rules: [
        {
          matches: [{ method: { service: 'shop.v1.Cart', method: 'Add' } }],
          filters: [
            {
              type: 'RequestHeaderModifier',
              requestHeaderModifier: { add: [{ name: 'x-rule', value: 'add' }] },
            },
          ],
          backendRefs: [to('cart-v1', 1), to('cart-v2', 1)],
        },
        {
          matches: [{ method: { service: 'shop.v1.Cart', method: 'Remove' } }],
          backendRefs: [{ name: 'no-port' }],
        },
      ],
    },
  });
  const at = (draw: number): EgressRoutes => {
    const table = new MeshRouteTable({
      routes: [route([{ backendRefs: [to('http')] }])],
      grpcRoutes: [grpc],
    });
    return { table: () => table, namespace: 'shop', clusterDomain: 'cluster.local', random: () => draw };
  };
  const rpc = (path: string) =>
    ({
      method: 'POST',
      url: path,
      headers: { host: 'web', 'content-type': 'application/grpc' },
    }) as unknown as IncomingMessage;
  const hosts = [0.2, 0.7].map((draw) => {
    const step = routeCall(at(draw), 'shop/web', 80, rpc('/shop.v1.Cart/Add'));
    assert.ok(step.kind === 'routed', JSON.stringify(step));
    const up = { url: '/shop.v1.Cart/Add', headers: {} as Record<string, string> };
    step.edit(up);
    assert.deepEqual(up, { url: '/shop.v1.Cart/Add', headers: { 'x-rule': 'add' } });
    return step.dest.host;
  });
  assert.deepEqual(hosts, ['cart-v1.shop.svc.cluster.local', 'cart-v2.shop.svc.cluster.local']);
  assert.deepEqual(routeCall(at(0), 'shop/web', 80, rpc('/shop.v1.Cart/Remove')), {
    kind: 'error',
    code: 'route_backend_invalid',
    detail: 'GRPCRoute shop/rpc rule 1: backendRef shop/no-port has no port',
    grpcStatus: GrpcStatus.UNAVAILABLE,
  });
  assert.deepEqual(routeCall(at(0), 'shop/web', 80, rpc('/shop.v1.Cart/List')), {
    kind: 'error',
    code: 'no_route',
    detail: 'no GRPCRoute rule for shop/web matches /shop.v1.Cart/List',
  });
});
