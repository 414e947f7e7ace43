// An HTTPRoute attached to a Service, on the sidecar's h2 egress: its ResponseHeaderModifier and its
// timeouts apply to HTTP/2 streams as to HTTP/1.1 requests (the plan reaches the HTTP/2 forwarder).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MeshRouteTable } from '../../../../src/routes/mesh.ts';
import { slimHTTPRoute } from '../../../../src/routes/objects.ts';
import { ep, service } from '../../routing/fixtures.ts';
import { startProxy, type Proxy } from '../harness.ts';
import { grpcHeaders, h2Client, h2Request, startH2Backend, type H2Backend } from './h2-harness.ts';

const route = slimHTTPRoute({
  metadata: { namespace: 'prod', name: 'web', creationTimestamp: '2026-01-01T00:00:00Z' },
  spec: {
    parentRefs: [{ group: '', kind: 'Service', name: 'web' }],
    rules: [
      {
        filters: [
          {
            type: 'ResponseHeaderModifier',
            responseHeaderModifier: { add: [{ name: 'x-resp', value: 'r' }] },
          },
        ],
        backendRefs: [{ name: 'web', port: 80 }],
      },
      {
        matches: [{ path: { type: 'Exact', value: '/slow' } }],
        timeouts: { request: '100ms' },
        backendRefs: [{ name: 'silent', port: 80 }],
      },
    ],
  },
});

let proxy: Proxy;
let echo: H2Backend;
let silent: H2Backend;

before(async () => {
  echo = await startH2Backend();
  silent = await startH2Backend(() => {});
  const table = new MeshRouteTable({ routes: [route] });
  proxy = await startProxy({}, { routes: { table: () => table } });
  for (const [name, backend] of [
    ['web', echo],
    ['silent', silent],
  ] as const)
    proxy.resolver.set(
      service('prod', name, {
        ports: [{ name: 'http', port: 80, protocol: 'TCP', appProtocol: 'kubernetes.io/h2c' }],
        eps: { http: [ep('127.0.0.1', backend.port)] },
      }),
    );
});

after(async () => {
  await proxy.close();
  await echo.close();
  await silent.close();
});

test("h2 egress: a route's response header filter and request timeout apply to streams", async () => {
  const c = await h2Client(proxy.egress);
  try {
    const r = await h2Request(c, grpcHeaders('web.prod', '/outrigger.v1.Test/Echo'), 'm');
    assert.equal(r.headers['x-resp'], 'r');
    assert.equal(r.trailers['grpc-status'], '0');
    const slow = await h2Request(c, { ':method': 'GET', ':path': '/slow', ':authority': 'web.prod' });
    assert.deepEqual([slow.headers[':status'], slow.headers['x-outrigger-error']], [504, 'upstream_timeout']);
  } finally {
    c.close();
  }
});
