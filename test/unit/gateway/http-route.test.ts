// The composed gateway with --gateway-api on the in-memory API and real loopback backends: HTTPRoutes
// attached to a Gateway of our class are served before the Ingresses; weights, matches, filters,
// redirects, invalid backends (500), HTTPS by the listener's certificate, and the fall-back to Ingress.
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { Gateway } from '../../../src/compose/gateway.ts';
import { CONTROLLER } from '../../../src/gateway/classes.ts';
import { FakeKubeApi } from '../../harness/fake-kube-api.ts';
import { httpsBody } from '../../harness/http-get.ts';
import { selfSigned, tlsSecretObject } from '../../harness/tls-certs.ts';
import {
  GW,
  loopbackService,
  ourGatewayClass,
  putIn,
  shopRoute as httpRoute,
  startApiGateway,
} from './gateway-api-fixtures.ts';
import { rawIngress } from './ingress-fixtures.ts';

const api = new FakeKubeApi();
const put = putIn(api);
const servers: Server[] = [];
let gateway: Gateway;
/** The gateway's weighted draws come from here, so a split is exact. */
let draws: number[] = [];
const pem = selfSigned('secure.example.com');

/** Answers "<name> <method> <url>" with the request headers it got in x-seen (JSON). */
async function backend(name: string): Promise<number> {
  const s = createServer((req, res) => {
    req.resume();
    res.setHeader('x-seen', JSON.stringify(req.headers));
    res.setHeader('x-backend-drop', 'gone');
    res.end(`${name} ${req.method} ${req.url}`);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  servers.push(s);
  return (s.address() as AddressInfo).port;
}

const service = (name: string, port: number): void => loopbackService(api, name, port);

const to = (name: string, weight?: number) => ({
  name,
  port: 80,
  ...(weight === undefined ? {} : { weight }),
});

/** Reads the request and never answers. */
async function silentBackend(): Promise<number> {
  const s = createServer((req) => req.resume());
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  servers.push(s);
  return (s.address() as AddressInfo).port;
}

before(async () => {
  for (const n of ['v1', 'v2', 'legacy']) service(n, await backend(n));
  service('silent', await silentBackend());
  ourGatewayClass(api);
  put(`${GW}/gateways`, {
    kind: 'Gateway',
    metadata: { namespace: 'infra', name: 'edge' },
    spec: {
      gatewayClassName: 'outrigger',
      listeners: [
        {
          name: 'http',
          port: 80,
          protocol: 'HTTP',
          hostname: '*.example.com',
          allowedRoutes: { namespaces: { from: 'All' } },
        },
        {
          name: 'https',
          port: 443,
          protocol: 'HTTPS',
          hostname: 'secure.example.com',
          tls: { certificateRefs: [{ name: 'secure-tls' }] },
          allowedRoutes: { namespaces: { from: 'All' } },
        },
        {
          name: 'broken',
          port: 443,
          protocol: 'HTTPS',
          hostname: 'broken.example.com',
          tls: { certificateRefs: [{ name: 'broken-tls' }] },
        },
      ],
    },
  });
  put('/api/v1/namespaces/infra/secrets', tlsSecretObject('infra', 'secure-tls', pem));
  // A kubernetes.io/tls Secret whose certificate does not parse.
  put(
    '/api/v1/namespaces/infra/secrets',
    tlsSecretObject('infra', 'broken-tls', { ...pem, cert: 'not a certificate' }),
  );
  const routes = [
    httpRoute('canary', {
      hostnames: ['app.example.com'],
      rules: [
        { backendRefs: [to('v1', 3), to('v2', 1)] },
        {
          matches: [
            { path: { type: 'PathPrefix', value: '/' }, headers: [{ name: 'x-canary', value: 'yes' }] },
          ],
          backendRefs: [to('v2')],
        },
      ],
    }),
    httpRoute('edits', {
      hostnames: ['edit.example.com'],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/old' } }],
          filters: [
            {
              type: 'URLRewrite',
              urlRewrite: {
                hostname: 'internal',
                path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/new' },
              },
            },
            {
              type: 'RequestHeaderModifier',
              requestHeaderModifier: {
                set: [{ name: 'x-set', value: 's' }],
                add: [{ name: 'x-add', value: 'b' }],
                remove: ['x-drop'],
              },
            },
            {
              type: 'ResponseHeaderModifier',
              responseHeaderModifier: { add: [{ name: 'x-resp', value: 'r' }], remove: ['x-backend-drop'] },
            },
          ],
          backendRefs: [to('v1')],
        },
        {
          matches: [{ path: { type: 'Exact', value: '/moved' } }],
          filters: [
            {
              type: 'RequestRedirect',
              requestRedirect: { scheme: 'https', hostname: 'secure.example.com', statusCode: 301 },
            },
          ],
        },
        { matches: [{ path: { type: 'PathPrefix', value: '/gone' } }], backendRefs: [to('nonexistent')] },
        { matches: [{ path: { type: 'PathPrefix', value: '/zero' } }], backendRefs: [to('v1', 0)] },
      ],
    }),
    httpRoute('timed', {
      hostnames: ['timed.example.com'],
      rules: [
        {
          matches: [{ path: { type: 'Exact', value: '/request' } }],
          timeouts: { request: '100ms' },
          backendRefs: [to('silent')],
        },
        {
          matches: [{ path: { type: 'Exact', value: '/attempt' } }],
          timeouts: { request: '1h', backendRequest: '100ms' },
          backendRefs: [to('silent')],
        },
        {
          matches: [{ path: { type: 'Exact', value: '/fast' } }],
          timeouts: { request: '1h' },
          backendRefs: [to('v1')],
        },
      ],
    }),
    httpRoute('secure', {
      parentRefs: [{ name: 'edge', namespace: 'infra', sectionName: 'https' }],
      rules: [{ backendRefs: [to('v2')] }],
    }),
  ];
  for (const r of routes) put(`${GW}/httproutes`, r);
  put('/apis/networking.k8s.io/v1/ingressclasses', {
    metadata: { name: 'outrigger' },
    spec: { controller: CONTROLLER },
  });
  put(
    '/apis/networking.k8s.io/v1/ingresses',
    rawIngress({
      name: 'old',
      namespace: 'shop',
      rules: [{ host: 'legacy.example.com', paths: [{ path: '/', svc: 'legacy', port: 80 }] }],
    }),
  );
  gateway = await startApiGateway(api, { weightDraw: () => draws.shift() ?? 0 });
});

after(async () => {
  await gateway.close();
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
});

function get(host: string, path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string; headers: Record<string, unknown> }>(
    (resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port: gateway.ports().http, path, headers: { host, ...headers } },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
        },
      );
      req.on('error', reject);
      req.end();
    },
  );
}

test('weights split by the draw; a header match takes precedence over the catch-all', async () => {
  draws = [0, 0.74, 0.75, 0.99];
  const got = [];
  for (let i = 0; i < 4; i++) got.push((await get('app.example.com', '/x')).body.split(' ')[0]);
  assert.deepEqual(got, ['v1', 'v1', 'v2', 'v2']);
  assert.equal((await get('app.example.com', '/x', { 'x-canary': 'yes' })).body, 'v2 GET /x');
});

test('URL rewrite, request and response header modifiers', async () => {
  const r = await get('edit.example.com:8080', '/old/page?q=1', { 'x-add': 'a', 'x-drop': 'd' });
  assert.equal(r.body, 'v1 GET /new/page?q=1');
  const seen = JSON.parse(String(r.headers['x-seen'])) as Record<string, string>;
  assert.equal(seen.host, 'internal');
  assert.equal(seen['x-set'], 's');
  assert.equal(seen['x-add'], 'a,b');
  assert.equal(seen['x-drop'], undefined);
  assert.equal(seen['x-forwarded-host'], 'edit.example.com:8080', 'the client asked for this host');
  assert.equal(r.headers['x-resp'], 'r');
  assert.equal(r.headers['x-backend-drop'], undefined);
});

test('a redirect is answered by the gateway', async () => {
  const r = await get('edit.example.com', '/moved?a=b');
  assert.equal(r.status, 301);
  assert.equal(r.headers.location, 'https://secure.example.com/moved?a=b');
});

test('a missing Service or weights of 0 are 500 route_backend_invalid; no match is 404', async () => {
  for (const path of ['/gone', '/zero']) {
    const r = await get('edit.example.com', path);
    assert.deepEqual([r.status, r.headers['x-outrigger-error']], [500, 'route_backend_invalid'], path);
  }
  const miss = await get('nothing.example.com', '/');
  assert.deepEqual([miss.status, miss.headers['x-outrigger-error']], [404, 'no_route']);
});

test("a rule's request and backendRequest timeouts answer 504 when the backend is silent", async () => {
  for (const path of ['/request', '/attempt']) {
    const r = await get('timed.example.com', path);
    assert.deepEqual([r.status, r.headers['x-outrigger-error']], [504, 'upstream_timeout'], path);
  }
  assert.equal((await get('timed.example.com', '/fast')).body, 'v1 GET /fast');
});

test('a host no HTTPRoute serves still reaches its Ingress', async () => {
  assert.equal((await get('legacy.example.com', '/a')).body, 'legacy GET /a');
});

test('HTTPS: the listener certificate by SNI, and routes attached to the HTTPS listener only', async () => {
  const port = gateway.ports().https!;
  assert.equal(await httpsBody(port, '/s', 'secure.example.com', { ca: pem.cert }), 'v2 GET /s');
  assert.equal((await get('secure.example.com', '/s')).status, 404, 'not attached to the HTTP listener');
  const status = gateway.store.status();
  assert.deepEqual([status.gateways, status.httpRoutes], [1, 4]);
});

test('status: GatewayClass and Gateway accepted, listeners count routes, routes name a missing backend; no rewrite of the same', async () => {
  const statusOf = (path: string) => {
    const hits = api.patches.filter((p) => p.path === path);
    return (hits.at(-1)?.patch as { status: Record<string, unknown> } | undefined)?.status;
  };
  const cond = (conds: unknown, type: string) => {
    const c = (conds as { type: string; status: string; reason: string }[]).find((x) => x.type === type)!;
    return `${c.status}/${c.reason}`;
  };
  for (let i = 0; i < 100 && !statusOf(`${GW}/namespaces/shop/httproutes/secure/status`); i++)
    await new Promise((r) => setTimeout(r, 20));
  assert.equal(
    cond(statusOf(`${GW}/gatewayclasses/outrigger/status`)!.conditions, 'Accepted'),
    'True/Accepted',
  );
  const gw = statusOf(`${GW}/namespaces/infra/gateways/edge/status`)!;
  assert.equal(cond(gw.conditions, 'Programmed'), 'True/Programmed');
  assert.deepEqual(
    (gw.listeners as { name: string; attachedRoutes: number }[]).map((l) => [l.name, l.attachedRoutes]),
    [
      ['http', 3],
      ['https', 1],
      ['broken', 0],
    ],
  );
  const broken = (gw.listeners as { name: string; conditions: unknown }[]).find((l) => l.name === 'broken')!;
  assert.equal(cond(broken.conditions, 'ResolvedRefs'), 'False/InvalidCertificateRef');
  assert.equal(cond(broken.conditions, 'Programmed'), 'False/Invalid');
  const parents = (r: string) =>
    statusOf(`${GW}/namespaces/shop/httproutes/${r}/status`)!.parents as {
      conditions: unknown;
      controllerName: string;
    }[];
  assert.equal(parents('canary')[0]!.controllerName, CONTROLLER);
  assert.equal(cond(parents('canary')[0]!.conditions, 'ResolvedRefs'), 'True/ResolvedRefs');
  assert.equal(cond(parents('edits')[0]!.conditions, 'Accepted'), 'True/Accepted');
  assert.equal(cond(parents('edits')[0]!.conditions, 'ResolvedRefs'), 'False/BackendNotFound');
  // The writes came back as watch events: the next rebuilds find every status in place.
  const before = api.patches.length;
  put(`${GW}/gatewayclasses`, { ...api.collections.get(`${GW}/gatewayclasses`)!.get('outrigger')! });
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(api.patches.length, before);
});
