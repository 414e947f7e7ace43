import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { ep, service } from '../routing/fixtures.ts';
import { corpus } from './corpus.ts';
import {
  chunkedRequest,
  closedPort,
  metric,
  raw,
  send,
  startProxy,
  startRecorder,
  type Backend,
  type Proxy,
  type Received,
} from './harness.ts';

/**
 * The malformed-request corpus and the data-path defect cases, through egress and ingress. Every
 * case gets its answer (4xx/5xx for the malformed ones) or a clean close within the timeouts, the
 * process keeps serving, and no upstream ever receives a body other than the one the client sent.
 */
let app: Backend & { got: Received[] };
let busy: Backend & { got: Received[] };
let switcher: Server;
let refusing: ReturnType<typeof createHttpServer>;
let proxy: Proxy;
/** The body the client sent, by request path; every body an upstream receives is checked against it. */
const sent = new Map<string, string>([['/', '']]);

before(async () => {
  app = await startRecorder();
  busy = await startRecorder((r, res) => {
    res.statusCode = 503;
    res.end(`busy ${r.body.length}`);
  });
  switcher = createServer((s) => {
    s.on('error', () => {});
    s.once('data', () =>
      s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n'),
    );
  });
  await new Promise<void>((r) => switcher.listen(0, '127.0.0.1', r));
  // Answers 401 at once, to an Expect: 100-continue too, without reading any body.
  const refuse = (_req: IncomingMessage, res: ServerResponse): void => {
    res.writeHead(401, { connection: 'close', 'content-length': '6' });
    res.end('denied');
  };
  refusing = createHttpServer(refuse).on('checkContinue', refuse);
  await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', r));
  proxy = await startProxy(
    { appPorts: [app.port], retryStatuses: [503], requestTimeoutMs: 1_000, idleTimeoutMs: 1_000 },
    { limits: { headersTimeoutMs: 300, checkIntervalMs: 100 } },
  );
  const dead = await closedPort();
  const r = proxy.resolver;
  r.set(service('prod', 'web', { eps: { http: [ep('127.0.0.1', app.port)] } }));
  r.set(service('prod', 'half', { eps: { http: [ep('127.0.0.1', dead), ep('127.0.0.1', app.port)] } }));
  r.set(service('prod', 'busy', { eps: { http: [ep('127.0.0.1', busy.port), ep('127.0.0.1', app.port)] } }));
  const switcherPort = (switcher.address() as AddressInfo).port;
  r.set(service('prod', 'switcher', { eps: { http: [ep('127.0.0.1', switcherPort)] } }));
  r.set(service('prod', 'dead', { eps: { http: [ep('127.0.0.1', dead)] } }));
  const refusingPort = (refusing.address() as AddressInfo).port;
  r.set(service('prod', 'refusing', { eps: { http: [ep('127.0.0.1', refusingPort)] } }));
});

after(async () => {
  await proxy.close();
  await app.close();
  await busy.close();
  switcher.close();
  refusing.close();
});

const listeners = ['egress', 'ingress'] as const;

describe('malformed requests', () => {
  for (const listener of listeners)
    for (const c of corpus) {
      const expected = listener === 'ingress' ? (c.ingress ?? c.status) : c.status;
      test(`${listener}: ${c.name} -> ${expected}`, async () => {
        const reply = await raw(proxy[listener], c.data);
        assert.ok(
          !reply.endsWith('<<timeout>>'),
          `answered and closed in time: ${JSON.stringify(reply.slice(0, 200))}`,
        );
        if (expected === 'close') return assert.equal(reply, '');
        assert.match(reply, new RegExp(`^HTTP/1\\.1 ${expected} `), JSON.stringify(reply.slice(0, 200)));
        if (expected >= 400) assert.match(reply, /x-outrigger-error: /i);
      });
    }
});

interface DataPathCase {
  name: string;
  path: string;
  body: string;
  request: (ports: Proxy) => string;
  /** Other requests the case sends on the same connection: their paths and bodies. */
  more?: Record<string, string>;
  /** Status line pattern per listener. */
  egress: RegExp;
  ingress: RegExp;
}

const get = (target: string, host: string, extra = ''): string =>
  `GET ${target} HTTP/1.1\r\nHost: ${host}\r\n${extra}Connection: close\r\n\r\n`;

const MiB = 1024 * 1024;

const cases: DataPathCase[] = [
  {
    name: 'chunked POST retried after a refused connect',
    path: '/d-chunked',
    body: 'chunked-body',
    request: () => chunkedRequest('POST', '/d-chunked', 'half.prod', 'chunked-body'),
    egress: /^HTTP\/1\.1 200 /,
    ingress: /^HTTP\/1\.1 200 /,
  },
  {
    name: 'Content-Length named by Connection, retried',
    path: '/d-cl',
    body: 'cl-body',
    request: () =>
      'POST /d-cl HTTP/1.1\r\nHost: half.prod\r\nContent-Length: 7\r\nConnection: content-length, close\r\n\r\ncl-body',
    egress: /^HTTP\/1\.1 200 /,
    ingress: /^HTTP\/1\.1 200 /,
  },
  {
    name: 'chunked PUT answered with a retry status',
    path: '/d-put',
    body: 'put-body',
    request: () => chunkedRequest('PUT', '/d-put', 'busy.prod', 'put-body'),
    egress: /^HTTP\/1\.1 503 /,
    ingress: /^HTTP\/1\.1 200 /,
  },
  {
    name: 'chunked DELETE whose body looks like a request',
    path: '/d-delete',
    body: 'GET /smuggled HTTP/1.1\r\nHost: web.prod\r\n\r\n',
    request: () =>
      chunkedRequest('DELETE', '/d-delete', 'web.prod', 'GET /smuggled HTTP/1.1\r\nHost: web.prod\r\n\r\n'),
    egress: /^HTTP\/1\.1 200 /,
    ingress: /^HTTP\/1\.1 200 /,
  },
  {
    name: 'h2c upgrade on a POST',
    path: '/d-h2c',
    body: 'h2c-body',
    request: () =>
      'POST /d-h2c HTTP/1.1\r\nHost: web.prod\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\n' +
      'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nContent-Length: 8\r\n\r\nh2c-body',
    egress: /^HTTP\/1\.1 200 /,
    ingress: /^HTTP\/1\.1 200 /,
  },
  {
    name: 'Connection naming Host',
    path: '/d-host',
    body: '',
    request: () => get('/d-host', 'web.prod', 'Connection: host\r\n'),
    egress: /^HTTP\/1\.1 200 /,
    ingress: /^HTTP\/1\.1 200 /,
  },
  {
    // Ingress ignores Host (it delivers to the app); egress must not dial itself.
    name: 'IPv4-mapped form of the egress listener',
    path: '/d-loop',
    body: '',
    request: (p) => get('/d-loop', `[::ffff:127.0.0.1]:${p.egress}`),
    egress: /^HTTP\/1\.1 508 /,
    ingress: /^HTTP\/1\.1 200 /,
  },
  {
    name: 'absolute-form decimal address of the egress listener',
    path: '/d-loop2',
    body: '',
    request: (p) => get(`http://2130706433:${p.egress}/d-loop2`, 'ignored'),
    egress: /^HTTP\/1\.1 508 /,
    ingress: /^HTTP\/1\.1 200 /,
  },
  {
    name: 'an upstream answering 101 to a plain request',
    path: '/d-101',
    body: '',
    request: () => get('/d-101', 'switcher.prod'),
    egress: /^HTTP\/1\.1 502 /,
    ingress: /^HTTP\/1\.1 200 /,
  },
  {
    // Egress has no endpoint to send it to: the 502 closes the connection (the rest of the upload
    // is read and dropped), so the second request is never served. Ingress serves both.
    name: 'a 1 MiB keep-alive upload to a refused endpoint, then a second request',
    path: '/d-early',
    body: 'u'.repeat(MiB),
    request: () =>
      `POST /d-early HTTP/1.1\r\nHost: dead.prod\r\nContent-Length: ${MiB}\r\n\r\n${'u'.repeat(MiB)}` +
      get('/d-early-next', 'dead.prod'),
    more: { '/d-early-next': '' },
    egress: /^HTTP\/1\.1 502 [^]*connection: close(?![^]*HTTP\/1\.1)/i,
    ingress: /^HTTP\/1\.1 200 [^]*HTTP\/1\.1 200 /,
  },
  {
    name: 'an app that answers a 2 MiB upload with 401 and Connection: close, unread',
    path: '/d-unread',
    body: 'v'.repeat(2 * MiB),
    request: () =>
      `POST /d-unread HTTP/1.1\r\nHost: refusing.prod\r\nContent-Length: ${2 * MiB}\r\nConnection: close\r\n\r\n` +
      'v'.repeat(2 * MiB),
    egress: /^HTTP\/1\.1 401 /,
    ingress: /^HTTP\/1\.1 200 /,
  },
  {
    // The client sends its body without waiting: an app that refuses answers before any 100.
    name: 'Expect: 100-continue to an app that refuses it',
    path: '/d-expect',
    body: 'expect-body',
    request: () =>
      'PUT /d-expect HTTP/1.1\r\nHost: refusing.prod\r\nExpect: 100-continue\r\nContent-Length: 11\r\n' +
      'Connection: close\r\n\r\nexpect-body',
    egress: /^HTTP\/1\.1 401 /,
    ingress: /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /,
  },
];

describe('data-path cases', () => {
  for (const listener of listeners)
    for (const c of cases) {
      test(`${listener}: ${c.name}`, async () => {
        sent.set(c.path, c.body);
        for (const [path, body] of Object.entries(c.more ?? {})) sent.set(path, body);
        const reply = await raw(proxy[listener], c.request(proxy));
        assert.ok(!reply.endsWith('<<timeout>>'), `answered in time: ${JSON.stringify(reply.slice(0, 200))}`);
        assert.match(reply, c[listener], JSON.stringify(reply.slice(0, 200)));
      });
    }
});

describe('after the corpus', () => {
  test('no upstream received a body other than the one the client sent', () => {
    const received = [...app.got, ...busy.got];
    assert.ok(received.length > 0);
    for (const r of received) {
      const path = r.url.split('?')[0] ?? '';
      assert.ok(sent.has(path), `an upstream received a request nobody sent: ${r.method} ${r.url}`);
      assert.equal(r.body, sent.get(path), `${r.method} ${r.url}`);
    }
  });

  test('rejections are counted by listener, status and code', async () => {
    for (const direction of listeners)
      assert.ok(
        (await metric(proxy, 'outrigger_requests_total', {
          direction,
          status: '400',
          error: 'bad_request',
        })) >= 19,
        direction,
      );
    assert.ok(
      (await metric(proxy, 'outrigger_requests_total', {
        direction: 'egress',
        status: '431',
        error: 'headers_too_large',
      })) >= 2,
    );
  });

  test('the process still proxies on both listeners', async () => {
    assert.equal((await send(proxy.egress, { headers: { host: 'web.prod' } })).status, 200);
    assert.equal((await send(proxy.ingress, { headers: { host: 'web.prod' } })).status, 200);
  });
});
