// HTTP/2 through the composed gateway (--gateway-api, the in-memory API, real loopback backends):
// prior-knowledge h2c and HTTP/1.1 on the one plaintext port, h2 by ALPN on the HTTPS port; an
// HTTP/2 request is routed as an HTTP/1.1 one (matches, filters, redirects, timeouts), then reaches
// an HTTP/1.1 backend translated, or an h2c backend (appProtocol kubernetes.io/h2c) over h2c with
// its trailers.
import assert from 'node:assert/strict';
import { Agent, createServer, request, type Server } from 'node:http';
import {
  connect,
  constants,
  type IncomingHttpHeaders,
  type ClientHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { Gateway } from '../../../src/compose/gateway.ts';
import { FakeKubeApi } from '../../harness/fake-kube-api.ts';
import { selfSigned, tlsSecretObject } from '../../harness/tls-certs.ts';
import { grpcHeaders, h2Client, h2Request, startH2Backend, type H2Backend } from '../proxy/h2/h2-harness.ts';

import {
  GW,
  loopbackService,
  ourGatewayClass,
  putIn,
  shopRoute as httpRoute,
  startApiGateway,
} from './gateway-api-fixtures.ts';

const api = new FakeKubeApi();
const put = putIn(api);
const servers: Server[] = [];
const h2Backends: H2Backend[] = [];
const sessions: ClientHttp2Session[] = [];
let gateway: Gateway;
const pem = selfSigned('secure.example.com');

/** HTTP/1.1: answers "<name> <method> <url> <body>" with the request headers it got in x-seen. */
async function backend(name: string): Promise<number> {
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res.setHeader('x-seen', JSON.stringify(req.headers));
      res.setHeader('x-backend-drop', 'gone');
      res.end(`${name} ${req.method} ${req.url} ${body}`);
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  servers.push(s);
  return (s.address() as AddressInfo).port;
}

/** h2c: a gRPC-shaped echo whose response headers carry the request's (x-seen), then OK trailers. */
function h2Echo(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, port: number): void {
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  stream.on('end', () => {
    stream.respond(
      {
        ':status': 200,
        'content-type': headers['content-type'] ?? 'text/plain',
        'x-seen': JSON.stringify(headers),
        'x-backend-drop': 'gone',
      },
      { waitForTrailers: true },
    );
    stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'x-port': String(port) }));
    stream.end(Buffer.concat(chunks));
  });
}

const service = (name: string, port: number, appProtocol?: string): void =>
  loopbackService(api, name, port, appProtocol);

const to = (name: string) => ({ name, port: 80 });
const respAdd = {
  type: 'ResponseHeaderModifier',
  responseHeaderModifier: { add: [{ name: 'x-resp', value: 'r' }], remove: ['x-backend-drop'] },
};

before(async () => {
  for (const n of ['v1', 'v2']) service(n, await backend(n));
  const grpc = await startH2Backend(h2Echo);
  const silent = await startH2Backend(() => {});
  h2Backends.push(grpc, silent);
  service('grpc', grpc.port, 'kubernetes.io/h2c');
  // The same h2c backend behind a port that says nothing of HTTP/2: a GRPCRoute calls it over h2c.
  service('grpc-plain', grpc.port);
  service('silent-h2', silent.port, 'kubernetes.io/h2c');
  ourGatewayClass(api);
  put(`${GW}/gateways`, {
    kind: 'Gateway',
    metadata: { namespace: 'infra', name: 'edge' },
    spec: {
      gatewayClassName: 'outrigger',
      listeners: [
        { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
        {
          name: 'https',
          port: 443,
          protocol: 'HTTPS',
          hostname: 'secure.example.com',
          tls: { certificateRefs: [{ name: 'secure-tls' }] },
          allowedRoutes: { namespaces: { from: 'All' } },
        },
      ],
    },
  });
  put('/api/v1/namespaces/infra/secrets', tlsSecretObject('infra', 'secure-tls', pem));
  const routes = [
    httpRoute('app', {
      hostnames: ['app.example.com'],
      rules: [
        { backendRefs: [to('v1')] },
        { matches: [{ headers: [{ name: 'x-canary', value: 'yes' }] }], backendRefs: [to('v2')] },
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
              requestHeaderModifier: { set: [{ name: 'x-set', value: 's' }], remove: ['x-drop'] },
            },
            respAdd,
          ],
          backendRefs: [to('v1')],
        },
        {
          matches: [{ path: { type: 'Exact', value: '/moved' } }],
          filters: [
            { type: 'RequestRedirect', requestRedirect: { hostname: 'new.example.com', statusCode: 301 } },
          ],
        },
        { matches: [{ path: { type: 'PathPrefix', value: '/gone' } }], backendRefs: [to('nonexistent')] },
      ],
    }),
    httpRoute('rpc', {
      hostnames: ['grpc.example.com'],
      rules: [
        { filters: [respAdd], backendRefs: [to('grpc')] },
        {
          matches: [{ path: { type: 'PathPrefix', value: '/v2' } }],
          filters: [
            {
              type: 'URLRewrite',
              urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/v1' } },
            },
          ],
          backendRefs: [to('grpc')],
        },
        {
          matches: [{ path: { type: 'Exact', value: '/slow' } }],
          timeouts: { request: '100ms' },
          backendRefs: [to('silent-h2')],
        },
        { matches: [{ path: { type: 'Exact', value: '/hang' } }], backendRefs: [to('silent-h2')] },
      ],
    }),
    httpRoute('secure', {
      parentRefs: [{ name: 'edge', namespace: 'infra', sectionName: 'https' }],
      rules: [{ backendRefs: [to('v2')] }],
    }),
  ];
  for (const r of routes) put(`${GW}/httproutes`, r);
  put(`${GW}/grpcroutes`, {
    ...httpRoute('calls', {
      hostnames: ['calls.example.com'],
      rules: [
        { matches: [{ method: { service: 'pkg.Svc', method: 'Call' } }], backendRefs: [to('grpc-plain')] },
        { matches: [{ method: { service: 'pkg.Svc', method: 'Gone' } }], backendRefs: [to('nonexistent')] },
      ],
    }),
    kind: 'GRPCRoute',
  });
  gateway = await startApiGateway(api);
});

after(async () => {
  for (const s of sessions) s.destroy();
  await gateway.close();
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  await Promise.all(h2Backends.map((b) => b.close()));
});

async function h2c(): Promise<ClientHttp2Session> {
  const s = await h2Client(gateway.ports().http);
  sessions.push(s);
  return s;
}

const seenBy = (h: IncomingHttpHeaders): Record<string, string> =>
  JSON.parse(String(h['x-seen'])) as Record<string, string>;

const get = (authority: string, path: string, extra: Record<string, string> = {}) => ({
  ':method': 'GET',
  ':path': path,
  ':authority': authority,
  ...extra,
});

test('h2c and HTTP/1.1 on the one plaintext port; an h2c request to an HTTP/1.1 backend, translated', async () => {
  const s = await h2c();
  const r = await h2Request(s, { ...get('app.example.com', '/x?q=1'), ':method': 'POST' }, 'body');
  assert.equal(r.headers[':status'], 200);
  assert.equal(r.body.toString(), 'v1 POST /x?q=1 body');
  const seen = JSON.parse(String(r.headers['x-seen'])) as Record<string, string>;
  assert.equal(seen.host, 'app.example.com', 'Host from :authority');
  assert.equal(seen['x-forwarded-proto'], 'http');
  assert.equal(seen['transfer-encoding'], 'chunked', 'a body without content-length is sent chunked');
  const sized = await h2Request(
    s,
    { ...get('app.example.com', '/'), ':method': 'PUT', 'content-length': '3' },
    'abc',
  );
  assert.equal(sized.body.toString(), 'v1 PUT / abc');
  const one = await new Promise<string>((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: gateway.ports().http, path: '/y', headers: { host: 'app.example.com' } },
      (res) => {
        let b = '';
        res.on('data', (c: Buffer) => (b += c.toString()));
        res.on('end', () => resolve(b));
      },
    );
    req.on('error', reject);
    req.end();
  });
  assert.equal(one, 'v1 GET /y ');
});

test('an h2 request is matched and filtered as an HTTP/1.1 one: header match, rewrite, header modifiers, redirect', async () => {
  const s = await h2c();
  assert.equal(
    (await h2Request(s, get('app.example.com', '/a', { 'x-canary': 'yes' }))).body.toString(),
    'v2 GET /a ',
  );
  const r = await h2Request(s, get('app.example.com', '/old/page?q=1', { 'x-drop': 'd' }));
  assert.equal(r.body.toString(), 'v1 GET /new/page?q=1 ');
  const seen = JSON.parse(String(r.headers['x-seen'])) as Record<string, string>;
  assert.deepEqual([seen.host, seen['x-set'], seen['x-drop']], ['internal', 's', undefined]);
  assert.deepEqual([r.headers['x-resp'], r.headers['x-backend-drop']], ['r', undefined]);
  const moved = await h2Request(s, get('app.example.com', '/moved'));
  assert.deepEqual([moved.headers[':status'], moved.headers.location], [301, 'http://new.example.com/moved']);
  const gone = await h2Request(s, get('app.example.com', '/gone'));
  assert.deepEqual(
    [gone.headers[':status'], gone.headers['x-outrigger-error']],
    [500, 'route_backend_invalid'],
  );
  const none = await h2Request(s, get('nothing.example.com', '/'));
  assert.deepEqual([none.headers[':status'], none.headers['x-outrigger-error']], [404, 'no_route']);
});

test('a gRPC call to an h2c backend (appProtocol kubernetes.io/h2c): over h2c, trailers relayed, filters applied', async () => {
  const s = await h2c();
  const r = await h2Request(s, grpcHeaders('grpc.example.com', '/pkg.Svc/Call', { 'x-drop': 'd' }), 'frame');
  assert.equal(r.headers[':status'], 200);
  assert.equal(r.body.toString(), 'frame');
  assert.equal(r.trailers['grpc-status'], '0');
  assert.equal(r.trailers['x-port'], String(h2Backends[0]!.port), 'the backend trailers, as sent');
  const seen = JSON.parse(String(r.headers['x-seen'])) as Record<string, string>;
  assert.equal(seen[':authority'], 'grpc.example.com');
  assert.equal(seen[':path'], '/pkg.Svc/Call');
  assert.equal(seen.te, 'trailers', 'gRPC servers require te: trailers');
  assert.equal(seen['x-forwarded-proto'], 'http');
  assert.equal(seen.host, undefined, 'no Host beside :authority');
  assert.deepEqual(
    [r.headers['x-resp'], r.headers['x-backend-drop']],
    ['r', undefined],
    'ResponseHeaderModifier',
  );
  const rewritten = await h2Request(s, grpcHeaders('grpc.example.com', '/v2/pkg.Svc/Call'), '');
  assert.equal(seenBy(rewritten.headers)[':path'], '/v1/pkg.Svc/Call');
});

test('a GRPCRoute: its backend called over h2c whatever the port says; UNAVAILABLE for a missing backend, UNIMPLEMENTED for no match', async () => {
  const s = await h2c();
  const r = await h2Request(s, grpcHeaders('calls.example.com', '/pkg.Svc/Call'), 'frame');
  assert.deepEqual([r.headers[':status'], r.body.toString(), r.trailers['grpc-status']], [200, 'frame', '0']);
  assert.equal(seenBy(r.headers)[':path'], '/pkg.Svc/Call', 'the backend got it as an HTTP/2 stream');
  const gone = await h2Request(s, grpcHeaders('calls.example.com', '/pkg.Svc/Gone'), '');
  assert.deepEqual(
    [gone.headers['x-outrigger-error'], gone.headers['grpc-status']],
    ['route_backend_invalid', '14'],
  );
  const none = await h2Request(s, grpcHeaders('calls.example.com', '/pkg.Svc/Other'), '');
  assert.deepEqual([none.headers['x-outrigger-error'], none.headers['grpc-status']], ['no_route', '12']);
});

test("a rule's request timeout holds for an h2c backend: 504, and DEADLINE_EXCEEDED for gRPC", async () => {
  const s = await h2c();
  const plain = await h2Request(s, get('grpc.example.com', '/slow'));
  assert.deepEqual([plain.headers[':status'], plain.headers['x-outrigger-error']], [504, 'upstream_timeout']);
  const call = await h2Request(s, grpcHeaders('grpc.example.com', '/slow'), '');
  assert.equal(call.headers['grpc-status'] ?? call.trailers['grpc-status'], '4');
});

test('proxy errors to gRPC clients are Trailers-Only with a gRPC status', async () => {
  const s = await h2c();
  const r = await h2Request(s, grpcHeaders('nothing.example.com', '/pkg.Svc/Call'), '');
  assert.equal(r.headers[':status'], 200);
  assert.equal(r.headers['x-outrigger-error'], 'no_route');
  assert.ok(r.headers['grpc-status'] !== undefined && r.headers['grpc-status'] !== '0');
});

test('malformed HTTP/2 requests are refused with 400, the connection keeps serving', async () => {
  const s = await h2c();
  // What HTTP/2 itself forbids (a :path not starting with /) is reset by the server's framing layer.
  const reset = await h2Request(s, get('app.example.com', 'no-slash'));
  assert.deepEqual([reset.headers[':status'], reset.rstCode], [undefined, constants.NGHTTP2_PROTOCOL_ERROR]);
  const bad = await h2Request(s, get('app.example.com', '/a%2fb'));
  assert.deepEqual([bad.headers[':status'], bad.headers['x-outrigger-error']], [400, 'bad_request']);
  const deadline = await h2Request(
    s,
    grpcHeaders('grpc.example.com', '/pkg.Svc/Call', { 'grpc-timeout': 'soon' }),
    '',
  );
  assert.equal(deadline.headers['grpc-status'], '13');
  assert.equal((await h2Request(s, get('app.example.com', '/ok'))).body.toString(), 'v1 GET /ok ');
});

test('HTTPS: h2 by ALPN, and HTTP/1.1 still, on the HTTPS port', async () => {
  const port = gateway.ports().https!;
  const s = connect(`https://127.0.0.1:${port}`, { ca: pem.cert, servername: 'secure.example.com' });
  sessions.push(s);
  await new Promise<void>((resolve, reject) => s.once('connect', () => resolve()).once('error', reject));
  assert.equal((s.socket as unknown as { alpnProtocol: string }).alpnProtocol, 'h2');
  const r = await h2Request(s, get('secure.example.com', '/s'));
  assert.equal(r.body.toString(), 'v2 GET /s ');
  assert.equal(seenBy(r.headers)['x-forwarded-proto'], 'https');
  const { httpsBody } = await import('../../harness/http-get.ts');
  assert.equal(await httpsBody(port, '/s', 'secure.example.com', { ca: pem.cert }), 'v2 GET /s ');
});

/** One HTTP/1.1 request through the gateway's plaintext port. */
function h1(host: string, path: string, method = 'GET', body?: string) {
  return new Promise<{
    status: number;
    headers: IncomingHttpHeaders;
    body: string;
    trailers: IncomingHttpHeaders;
  }>((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: gateway.ports().http, method, path, headers: { host } },
      (res) => {
        let b = '';
        res.on('data', (c: Buffer) => (b += c.toString()));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: b, trailers: res.trailers }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

test('an HTTP/1.1 client to an h2c backend: the request goes as a stream, the answer and its trailers come back as HTTP/1.1', async () => {
  const r = await h1('grpc.example.com', '/v2/pkg.Svc/Call?x=1', 'POST', 'hello');
  assert.equal(r.status, 200);
  assert.equal(r.body, 'hello');
  assert.equal(r.trailers['grpc-status'], '0', 'trailers, as chunked trailers');
  assert.equal(r.trailers['x-port'], String(h2Backends[0]!.port));
  const seen = seenBy(r.headers);
  assert.deepEqual(
    [seen[':method'], seen[':path'], seen[':authority']],
    ['POST', '/v1/pkg.Svc/Call?x=1', 'grpc.example.com'],
  );
  assert.equal(seen['x-forwarded-proto'], 'http');
  const slow = await h1('grpc.example.com', '/slow');
  assert.deepEqual([slow.status, slow.headers['x-outrigger-error']], [504, 'upstream_timeout']);
});

test('HTTP/1.1 to an h2c backend: a 4 MiB body both ways, and requests one after another on one connection', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const sockets = new Set<unknown>();
  const post = (body: Buffer) =>
    new Promise<Buffer>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: gateway.ports().http,
          method: 'POST',
          path: '/big',
          agent,
          headers: { host: 'grpc.example.com' },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve(Buffer.concat(chunks)));
        },
      );
      req.on('socket', (s) => sockets.add(s));
      req.on('error', reject);
      req.end(body);
    });
  try {
    const big = Buffer.alloc(4 * 1024 * 1024, 'x');
    assert.equal((await post(big)).length, big.length);
    for (let i = 0; i < 3; i++) assert.equal((await post(Buffer.from(`n${i}`))).toString(), `n${i}`);
    assert.equal(sockets.size, 1, 'one keep-alive connection');
  } finally {
    agent.destroy();
  }
});

test('HTTP/1.1 to an h2c backend: a client gone before the answer cancels the upstream stream', async () => {
  const silent = h2Backends[1]!;
  const before = silent.streams.length;
  const cancelled = new Promise<number>((resolve) =>
    silent.server.once('stream', (s: ServerHttp2Stream) => s.once('close', () => resolve(s.rstCode))),
  );
  await new Promise<void>((resolve) => {
    const req = request({
      host: '127.0.0.1',
      port: gateway.ports().http,
      path: '/hang',
      headers: { host: 'grpc.example.com' },
    });
    req.on('error', () => resolve());
    req.end();
    const check = setInterval(() => {
      if (silent.streams.length > before) {
        clearInterval(check);
        req.destroy();
      }
    }, 2);
  });
  assert.equal(await cancelled, constants.NGHTTP2_CANCEL);
  const r = await h1('grpc.example.com', '/after');
  assert.equal(r.status, 200, 'the gateway serves on');
});

// Last: it drains the gateway.
test('drain: HTTP/2 connections get GOAWAY, and a stream in flight finishes', async () => {
  const s = await h2c();
  const goaway = new Promise<void>((resolve) => s.once('goaway', () => resolve()));
  const backend = h2Backends[0]!;
  const seen = backend.streams.length;
  const call = s.request(grpcHeaders('grpc.example.com', '/pkg.Svc/Slow'));
  const chunks: Buffer[] = [];
  let trailers: IncomingHttpHeaders = {};
  call.on('data', (c: Buffer) => chunks.push(c));
  call.on('trailers', (t: IncomingHttpHeaders) => (trailers = t));
  const closed = new Promise<void>((resolve) => call.once('close', () => resolve()));
  call.write('one,');
  for (let i = 0; i < 200 && backend.streams.length === seen; i++) await new Promise((r) => setTimeout(r, 5));
  const drained = gateway.drain(5_000);
  await goaway;
  call.end('two');
  await closed;
  assert.equal(Buffer.concat(chunks).toString(), 'one,two');
  assert.equal(trailers['grpc-status'], '0');
  await drained;
});
