// The composed gateway (src/compose/gateway.ts) on the in-memory API and real loopback backends:
// Host/path routing to Service endpoints, named and numbered ports, the proxy's errors with
// x-outrigger-error, retries past a dead endpoint, HTTPS by SNI, WebSocket, metrics and a SERVER hop.
import assert from 'node:assert/strict';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { startGateway, type Gateway } from '../../../src/compose/gateway.ts';
import { FakeKubeApi } from '../../harness/fake-kube-api.ts';
import { CONTROLLER } from '../../../src/gateway/classes.ts';
import { loadGatewayConfig } from '../../../src/config/gateway-options.ts';
import { combineObservers, type HopObserver, type HopStart } from '../../../src/proxy/observer.ts';
import { createTracing, type Tracing } from '../../../src/tracing/index.ts';
import { httpsBody } from '../../harness/http-get.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';
import { rawIngress } from './ingress-fixtures.ts';
import { selfSigned, tlsSecretObject } from '../../harness/tls-certs.ts';

type Obj = Parameters<FakeKubeApi['put']>[1];
const api = new FakeKubeApi();
const put = (path: string, o: unknown): void => api.put(path, o as Obj);
const backends: Server[] = [];
let gateway: Gateway;
const spans = new InMemorySpanExporter();
let tracing: Tracing;
const hops: { start: HopStart; service?: string; status?: number; error?: string }[] = [];
const pem = selfSigned('shop.example.com');

/** A backend answering "<name> <method> <path> <x-forwarded-proto> <x-forwarded-host>"; WebSocket echo. */
async function backend(name: string): Promise<number> {
  const s = createServer((req, res) => {
    req.resume();
    const h: IncomingHttpHeaders = req.headers;
    res.setHeader('x-seen-traceparent', String(h.traceparent ?? ''));
    const forwarding = ['x-real-ip', 'forwarded', 'x-forwarded-port', 'x-forwarded-for'];
    res.setHeader('x-seen-forwarding', JSON.stringify(forwarding.map((k) => h[k] ?? null)));
    res.end(
      `${name} ${req.method} ${req.url} ${String(h['x-forwarded-proto'])} ${String(h['x-forwarded-host'])}`,
    );
  });
  s.on('upgrade', (_req, socket) => {
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    socket.on('data', (d: Buffer) => socket.write(`echo:${d.toString()}`));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  backends.push(s);
  return (s.address() as AddressInfo).port;
}

/** A Service with one port and (unless port is undefined) one ready endpoint 127.0.0.1:port. */
function service(ns: string, name: string, svcPort: { name: string; port: number }, port?: number): void {
  put('/api/v1/services', {
    metadata: { namespace: ns, name },
    spec: { clusterIP: '10.96.0.10', ports: [{ ...svcPort, protocol: 'TCP', targetPort: svcPort.name }] },
  });
  put(`/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`, {
    metadata: { namespace: ns, name: `${name}-1`, labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    endpoints: port === undefined ? [] : [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
    ports: [{ name: svcPort.name, port: port ?? 1, protocol: 'TCP' }],
  });
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

before(async () => {
  const web = await backend('web');
  const apiPort = await backend('api');
  // A port nothing listens on: a dead endpoint next to a live one.
  const deadPort = await freePort();
  put('/apis/networking.k8s.io/v1/ingressclasses', {
    metadata: { name: 'outrigger' },
    spec: { controller: CONTROLLER },
  });
  service('shop', 'web', { name: 'http', port: 80 }, web);
  service('shop', 'api', { name: 'http', port: 8081 }, apiPort);
  service('shop', 'empty', { name: 'http', port: 80 });
  put('/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices', {
    metadata: { namespace: 'shop', name: 'flaky-a', labels: { 'kubernetes.io/service-name': 'flaky' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
    ports: [{ name: 'http', port: web, protocol: 'TCP' }],
  });
  put('/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices', {
    metadata: { namespace: 'shop', name: 'flaky-b', labels: { 'kubernetes.io/service-name': 'flaky' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['127.0.0.2'], conditions: { ready: true } }],
    ports: [{ name: 'http', port: deadPort, protocol: 'TCP' }],
  });
  put('/api/v1/services', {
    metadata: { namespace: 'shop', name: 'flaky' },
    spec: {
      clusterIP: '10.96.0.11',
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 'http' }],
    },
  });
  put(
    '/apis/networking.k8s.io/v1/ingresses',
    rawIngress({
      name: 'shop',
      namespace: 'shop',
      rules: [
        {
          host: 'shop.example.com',
          paths: [
            { path: '/', svc: 'web', port: 80 },
            { path: '/api', svc: 'api', port: 'http' },
            { path: '/empty', svc: 'empty', port: 80 },
            { path: '/flaky', svc: 'flaky', port: 80 },
            { path: '/missing', svc: 'missing', port: 80 },
            { path: '/noport', svc: 'web', port: 9999 },
          ],
        },
      ],
      tls: [{ hosts: ['shop.example.com'], secretName: 'shop-tls' }],
    }),
  );
  put('/api/v1/namespaces/shop/secrets', tlsSecretObject('shop', 'shop-tls', pem));
  const observer: HopObserver = {
    startHop(start) {
      const h: (typeof hops)[number] = { start };
      hops.push(h);
      return {
        setService: (s) => void (h.service = s),
        setEndpoint: () => {},
        addRetry: () => {},
        setStale: () => {},
        inject: () => {},
        end: (r) => {
          h.status = r.status;
          if (r.errorCode) h.error = r.errorCode;
        },
      };
    },
  };
  tracing = createTracing({
    endpoint: undefined,
    exporter: spans,
    sampling: 1,
    pod: { name: 'outrigger-gateway-5d8f9-abcde', namespace: 'outrigger-gateway' },
    logger: memoryLogger('warn'),
  });
  const config = loadGatewayConfig({
    flags: {
      httpPort: '1',
      httpsPort: '1',
      adminPort: '1',
      listenHost: '127.0.0.1',
      traceEndpoint: 'http://127.0.0.1:1/',
    },
  });
  gateway = await startGateway(
    { ...config, httpPort: 0, httpsPort: 0, adminPort: 0 },
    {
      api,
      log: memoryLogger('warn'),
      observer: combineObservers(observer, tracing.observer),
      tuning: { discoveryWaitMs: 2_000 },
    },
  );
  // Backends are subscribed from the table; let the fake API answer.
  for (let i = 0; i < 50 && gateway.resolver.status().subscriptions < 5; i++)
    await new Promise((r) => setTimeout(r, 10));
});

after(async () => {
  await gateway.close();
  await tracing.shutdown();
  for (const b of backends) b.close();
});

function get(
  host: string,
  path: string,
  port = gateway.ports().http,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; error: string | undefined; upstreamTraceparent: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host, ...headers } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body,
          error: res.headers['x-outrigger-error'] as string | undefined,
          upstreamTraceparent: String(res.headers['x-seen-traceparent'] ?? ''),
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

test('host and path route to the Service endpoints, by port number and by port name', async () => {
  assert.equal((await get('shop.example.com', '/cart?x=1')).body, 'web GET /cart?x=1 http shop.example.com');
  assert.equal(
    (await get('SHOP.example.com:8080', '/api/v1')).body,
    'api GET /api/v1 http SHOP.example.com:8080',
  );
  assert.equal((await get('shop.example.com', '/apiv1')).body.split(' ')[0], 'web');
});

test('X-Real-IP, X-Forwarded-Port and Forwarded come from the connection, never from the client', async () => {
  const port = gateway.ports().http;
  const seen = await new Promise<string>((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/cart',
        headers: {
          host: 'shop.example.com',
          'x-real-ip': '203.0.113.9',
          forwarded: 'for=203.0.113.9;proto=https',
          'x-forwarded-port': '443',
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(String(res.headers['x-seen-forwarding'])));
      },
    );
    req.on('error', reject);
    req.end();
  });
  // The client's own address is appended to X-Forwarded-For; what it claims is never taken as fact.
  assert.deepEqual(JSON.parse(seen), ['127.0.0.1', null, String(port), '127.0.0.1']);
});

/** One request written verbatim on a raw socket (HTTP clients normalise paths); its status and body. */
function rawGet(target: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(gateway.ports().http, '127.0.0.1');
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    socket.on('error', reject);
    socket.on('end', () => {
      const [head = '', body = ''] = got.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), body });
    });
    socket.write(`GET ${target} HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n`);
  });
}

test('dot-segments are resolved before matching, and the backend gets the path that matched', async () => {
  const cases: [string, string][] = [
    ['/api/../cart', 'web GET /cart'],
    ['/api/%2e%2e/cart', 'web GET /cart'],
    ['/api/.%2e/cart', 'web GET /cart'],
    ['/api/%2E%2e/cart?x=1', 'web GET /cart?x=1'],
    ['/cart/../api/v1', 'api GET /api/v1'],
    ['/api/./v1', 'api GET /api/v1'],
    ['/%61pi/v1', 'api GET /api/v1'],
  ];
  for (const [target, want] of cases) {
    const r = await rawGet(target);
    assert.equal(r.status, 200, target);
    assert.equal(r.body.split(' ').slice(0, 3).join(' '), want, target);
  }
});

test('an encoded slash or backslash in the path is refused with 400, never guessed at', async () => {
  for (const target of ['/api%2f..%2fcart', '/api/..%5Ccart', '/api/..\\cart']) {
    const r = await rawGet(target);
    assert.equal(r.status, 400, target);
  }
});

test('absolute-form request targets route by their own authority', async () => {
  const r = await get('ignored.example', 'http://shop.example.com/api/x');
  assert.equal(r.body, 'api GET /api/x http shop.example.com');
});

test('errors carry x-outrigger-error: 404 no_route, 503 no_endpoints for empty, missing or portless backends', async () => {
  const none = await get('other.example.com', '/');
  assert.deepEqual([none.status, none.error], [404, 'no_route']);
  for (const path of ['/empty', '/missing', '/noport']) {
    const r = await get('shop.example.com', path);
    assert.deepEqual([r.status, r.error], [503, 'no_endpoints'], `${path}: ${r.body}`);
  }
});

test('a dead endpoint next to a live one costs no failed GET (connect failures retried, then ejected)', async () => {
  const statuses = [];
  for (let i = 0; i < 30; i++) statuses.push((await get('shop.example.com', '/flaky')).status);
  assert.deepEqual(new Set(statuses), new Set([200]));
});

test('HTTPS by SNI reaches the same routes with x-forwarded-proto https', async () => {
  const port = gateway.ports().https;
  assert.ok(port, 'the HTTPS listener is up');
  const body = await httpsBody(port, '/secure', 'shop.example.com', {
    ca: pem.cert,
    checkServerIdentity: () => undefined,
  });
  assert.equal(body, 'web GET /secure https shop.example.com');
});

test('WebSocket upgrades are proxied to the routed Service', async () => {
  const echoed = await new Promise<string>((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: gateway.ports().http,
      path: '/api/ws',
      headers: { host: 'shop.example.com', connection: 'Upgrade', upgrade: 'websocket' },
    });
    req.on('upgrade', (res, socket) => {
      assert.equal(res.statusCode, 101);
      socket.once('data', (d: Buffer) => {
        socket.destroy();
        resolve(d.toString());
      });
      socket.write('hello');
    });
    req.on('error', reject);
    req.end();
  });
  assert.equal(echoed, 'echo:hello');
});

test('each request is one SERVER-side (ingress) hop with its Service; metrics count it as gateway', async () => {
  hops.length = 0;
  await get('shop.example.com', '/api/m');
  await get('nowhere.example', '/');
  assert.equal(hops.length, 2);
  assert.deepEqual(
    hops.map((h) => [h.start.direction, h.service, h.status, h.error]),
    [
      ['ingress', 'shop/api', 200, undefined],
      ['ingress', undefined, 404, 'no_route'],
    ],
  );
  const text = await gateway.metrics.render();
  assert.match(
    text,
    /outrigger_requests_total\{direction="gateway",service="shop\/api",caller="",status="200",error=""\} \d+/,
  );
  assert.match(text, /outrigger_gateway_routes 6/);
});

test("one SERVER span per request continues the caller's trace and is propagated to the backend", async () => {
  await tracing.flush();
  spans.reset();
  const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
  const r = await get('shop.example.com', '/api/traced', gateway.ports().http, {
    traceparent: `00-${trace}-00f067aa0ba902b7-01`,
  });
  assert.equal(r.status, 200);
  await tracing.flush();
  const finished = spans.getFinishedSpans();
  assert.equal(finished.length, 1);
  const span = finished[0];
  assert.equal(span?.kind, SpanKind.SERVER);
  assert.equal(span?.spanContext().traceId, trace);
  assert.equal(span?.attributes['outrigger.service'], 'shop/api');
  assert.match(r.upstreamTraceparent, new RegExp(`^00-${trace}-${span?.spanContext().spanId}-01$`));
});

test("another namespace's Ingress cannot add paths to a host it does not own: not routed, reported in /debug/gateway", async () => {
  const evil = await backend('evil');
  service('team-b', 'evil', { name: 'http', port: 80 }, evil);
  put(
    '/apis/networking.k8s.io/v1/ingresses',
    rawIngress({
      name: 'takeover',
      namespace: 'team-b',
      created: '2026-02-01T00:00:00Z',
      rules: [{ host: 'shop.example.com', paths: [{ path: '/public/login', svc: 'evil', port: 80 }] }],
    }),
  );
  try {
    for (let i = 0; i < 100 && gateway.store.status().ingresses < 2; i++)
      await new Promise((r) => setTimeout(r, 10));
    assert.equal(gateway.store.status().ingresses, 2, 'the Ingress reached the gateway');
    // The host is team shop's: its `/` rule answers, over HTTP and over HTTPS with its certificate.
    assert.equal((await get('shop.example.com', '/public/login')).body.split(' ')[0], 'web');
    const body = await httpsBody(gateway.ports().https ?? 0, '/public/login', 'shop.example.com', {
      ca: pem.cert,
      checkServerIdentity: () => undefined,
    });
    assert.equal(body.split(' ')[0], 'web');
    const debug = await new Promise<string>((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port: gateway.ports().admin, path: '/debug/gateway' },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve(text));
        },
      );
      req.on('error', reject);
      req.end();
    });
    const view = JSON.parse(debug) as {
      conflicts: number;
      problems: { ingress: string; message: string; conflict?: unknown }[];
    };
    assert.equal(view.conflicts, 1);
    assert.deepEqual(
      view.problems.filter((p) => p.conflict),
      [
        {
          ingress: 'team-b/takeover',
          message: view.problems.find((p) => p.conflict)?.message,
          conflict: { kind: 'host', host: 'shop.example.com', winner: 'shop/shop', owner: 'shop' },
        },
      ],
    );
    assert.match(await gateway.metrics.render(), /outrigger_gateway_conflicts 1/);
  } finally {
    api.remove('/apis/networking.k8s.io/v1/ingresses', 'takeover');
  }
});
