import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MeshRouteTable } from '../../../src/routes/mesh.ts';
import { slimGRPCRoute, slimHTTPRoute } from '../../../src/routes/objects.ts';
import { ep, service } from '../routing/fixtures.ts';
import { send, startBackend, startProxy, type Backend, type Proxy } from './harness.ts';
import { grpcHeaders, h2Client, h2Request, startH2Backend, type H2Backend } from './h2/h2-harness.ts';

/**
 * An HTTPRoute attached to Service prod/web, applied by the sidecar's data path to HTTP/1.1 requests
 * and to h2 streams alike: a header match to web-v2, a prefix rewrite, and no match answered 404.
 */
const route = slimHTTPRoute({
  metadata: { namespace: 'prod', name: 'web', creationTimestamp: '2026-01-01T00:00:00Z' },
  spec: {
    parentRefs: [{ group: '', kind: 'Service', name: 'web' }],
    rules: [
      {
        matches: [{ headers: [{ name: 'x-canary', value: '1' }] }],
        backendRefs: [{ name: 'web-v2', port: 80 }],
      },
      {
        matches: [{ path: { type: 'PathPrefix', value: '/legacy' } }],
        filters: [
          {
            type: 'URLRewrite',
            urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/v2' } },
          },
        ],
        backendRefs: [{ name: 'web', port: 80 }],
      },
    ],
  },
});

/** A GRPCRoute attached to Service prod/rpc: a method to rpc-v2 with header filters, one to nowhere. */
const grpcRoute = slimGRPCRoute({
  metadata: { namespace: 'prod', name: 'rpc', creationTimestamp: '2026-01-01T00:00:00Z' },
  spec: {
    parentRefs: [{ group: '', kind: 'Service', name: 'rpc' }],
    rules: [
      {
        matches: [{ method: { service: 'shop.v1.Cart', method: 'Add' } }],
        filters: [
          {
            type: 'RequestHeaderModifier',
            requestHeaderModifier: { set: [{ name: 'x-rule', value: 'add' }] },
          },
          {
            type: 'ResponseHeaderModifier',
            responseHeaderModifier: { add: [{ name: 'x-routed', value: 'grpc' }] },
          },
        ],
        backendRefs: [{ name: 'web-v2', port: 80 }],
      },
      {
        matches: [{ method: { service: 'shop.v1.Cart', method: 'Remove' } }],
        backendRefs: [{ name: 'gone', port: 80, kind: 'Unknown' }],
      },
    ],
  },
});

let proxy: Proxy;
let v1: Backend;
let v2: Backend;
let h2v1: H2Backend;
let h2v2: H2Backend;

before(async () => {
  [v1, v2, h2v1, h2v2] = [
    await startBackend(),
    await startBackend(),
    await startH2Backend(),
    await startH2Backend(),
  ];
  const table = new MeshRouteTable({ routes: [route], grpcRoutes: [grpcRoute] });
  proxy = await startProxy({}, { routes: { table: () => table } });
});

after(async () => {
  await proxy.close();
  for (const b of [v1, v2, h2v1, h2v2]) await b.close();
});

const serve = (h2: boolean): void => {
  const [a, b] = h2 ? [h2v1, h2v2] : [v1, v2];
  const appProtocol = h2 ? { appProtocol: 'kubernetes.io/h2c' } : {};
  for (const [name, backend] of [
    ['web', a],
    ['web-v2', b],
    ['rpc', a],
  ] as const)
    proxy.resolver.set(
      service('prod', name, {
        ports: [{ name: 'http', port: 80, protocol: 'TCP', ...appProtocol }],
        eps: { http: [ep('127.0.0.1', backend.port)] },
      }),
    );
};

test('HTTP/1.1: a header match goes to web-v2, a prefix is rewritten, and no match is 404 no_route', async () => {
  serve(false);
  const canary = await send(proxy.egress, { path: '/a', headers: { host: 'web.prod', 'x-canary': '1' } });
  assert.equal(canary.body, `hello from ${v2.port}`);
  const legacy = await send(proxy.egress, { headers: { host: 'web.prod' }, path: '/legacy/item?x=1' });
  assert.equal(legacy.body, `hello from ${v1.port}`);
  assert.equal(v1.hits.at(-1)?.url, '/v2/item?x=1');
  const none = await send(proxy.egress, { headers: { host: 'web.prod' }, path: '/other' });
  assert.deepEqual([none.status, none.headers['x-outrigger-error']], [404, 'no_route']);
  const other = await send(proxy.egress, { headers: { host: 'web-v2.prod' }, path: '/other' });
  assert.equal(other.body, `hello from ${v2.port}`, 'a Service without a route: as it is');
});

test('h2: the same route picks the backend of each stream and rewrites :path', async () => {
  serve(true);
  const c = await h2Client(proxy.egress);
  try {
    const canary = await h2Request(
      c,
      grpcHeaders('web.prod', '/outrigger.v1.Test/Echo', { 'x-canary': '1' }),
      'm',
    );
    assert.equal(canary.trailers['x-port'], String(h2v2.port));
    const legacy = await h2Request(c, grpcHeaders('web.prod', '/legacy/Echo'), 'm');
    assert.equal(legacy.trailers['x-port'], String(h2v1.port));
    assert.equal(h2v1.streams.at(-1)?.[':path'], '/v2/Echo');
    const none = await h2Request(c, grpcHeaders('web.prod', '/outrigger.v1.Test/Echo'), 'm');
    assert.equal(none.headers['x-outrigger-error'] ?? none.trailers['x-outrigger-error'], 'no_route');
  } finally {
    c.close();
  }
});

test('h2: a GRPCRoute picks the backend by method, applies its request and response header filters; UNAVAILABLE and UNIMPLEMENTED', async () => {
  serve(true);
  const c = await h2Client(proxy.egress);
  try {
    const add = await h2Request(c, grpcHeaders('rpc.prod', '/shop.v1.Cart/Add'), 'm');
    assert.equal(add.trailers['x-port'], String(h2v2.port));
    assert.equal(add.headers['x-routed'], 'grpc', 'the response header filter');
    assert.equal(h2v2.streams.at(-1)?.['x-rule'], 'add', 'the request header filter');
    const invalid = await h2Request(c, grpcHeaders('rpc.prod', '/shop.v1.Cart/Remove'), 'm');
    const status = (r: typeof invalid) => r.headers['grpc-status'] ?? r.trailers['grpc-status'];
    assert.deepEqual(
      [status(invalid), invalid.headers['x-outrigger-error']],
      ['14', 'route_backend_invalid'],
    );
    const none = await h2Request(c, grpcHeaders('rpc.prod', '/shop.v1.Cart/List'), 'm');
    assert.deepEqual([status(none), none.headers['x-outrigger-error']], ['12', 'no_route']);
  } finally {
    c.close();
  }
});
