import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { ep, service } from '../routing/fixtures.ts';
import { raw, startProxy, type Proxy } from './harness.ts';

/**
 * Upstreams that misbehave after accepting a request: every case ends in a response or a closed
 * client connection within the configured timeouts, through egress and ingress.
 */
async function rawServer(onRequest: (s: Socket) => void): Promise<{ port: number; server: Server }> {
  const server = createServer((s) => {
    s.on('error', () => {});
    s.once('data', () => onRequest(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, server };
}

let switcher: { port: number; server: Server };
let staller: { port: number; server: Server };
let egress: Proxy;
let ingressToSwitcher: Proxy;
let ingressToStaller: Proxy;

before(async () => {
  switcher = await rawServer((s) =>
    s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n'),
  );
  staller = await rawServer((s) =>
    s.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part of the body'),
  );
  const timeouts = { requestTimeoutMs: 1_000, idleTimeoutMs: 1_000 };
  egress = await startProxy(timeouts);
  egress.resolver.set(service('prod', 'switcher', { eps: { http: [ep('127.0.0.1', switcher.port)] } }));
  egress.resolver.set(service('prod', 'staller', { eps: { http: [ep('127.0.0.1', staller.port)] } }));
  ingressToSwitcher = await startProxy({ ...timeouts, appPorts: [switcher.port] });
  ingressToStaller = await startProxy({ ...timeouts, appPorts: [staller.port] });
});

after(async () => {
  for (const p of [egress, ingressToSwitcher, ingressToStaller]) await p.close();
  switcher.server.close();
  staller.server.close();
});

const get = (host: string): string => `GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`;

test('egress: an upstream answering 101 to a plain request is a 502', async () => {
  const reply = await raw(egress.egress, get('switcher.prod'), 8_000);
  assert.match(reply, /^HTTP\/1\.1 502 /, reply);
  assert.match(reply, /x-outrigger-error: upstream_failed/i);
});

test('ingress: an app answering 101 to a plain request is a 502', async () => {
  const reply = await raw(ingressToSwitcher.ingress, get('me'), 8_000);
  assert.match(reply, /^HTTP\/1\.1 502 /, reply);
});

test('egress: a response body that stalls is cut off after the idle timeout', async () => {
  const reply = await raw(egress.egress, get('staller.prod'), 8_000);
  assert.match(reply, /^HTTP\/1\.1 200 /, reply);
  assert.ok(!reply.endsWith('<<timeout>>'), 'the proxy closed the connection');
});

test('ingress: a response body that stalls is cut off after the idle timeout', async () => {
  const reply = await raw(ingressToStaller.ingress, get('me'), 8_000);
  assert.ok(!reply.endsWith('<<timeout>>'), 'the proxy closed the connection');
});

test('egress: a WebSocket upgrade the upstream never answers is closed after the idle timeout', async () => {
  const silent = await rawServer(() => {});
  egress.resolver.set(service('prod', 'silent', { eps: { http: [ep('127.0.0.1', silent.port)] } }));
  try {
    const reply = await raw(
      egress.egress,
      'GET / HTTP/1.1\r\nHost: silent.prod\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      8_000,
    );
    assert.ok(!reply.endsWith('<<timeout>>'), 'the proxy closed the connection');
  } finally {
    silent.server.close();
  }
});

test('egress: an upstream 103 Early Hints before its answer: the client gets the answer', async () => {
  const hints = await rawServer((s) =>
    s.end(
      'HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n' +
        'HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nanswer',
    ),
  );
  egress.resolver.set(service('prod', 'hints', { eps: { http: [ep('127.0.0.1', hints.port)] } }));
  try {
    const reply = await raw(egress.egress, `GET / HTTP/1.1\r\nHost: hints.prod\r\nConnection: close\r\n\r\n`);
    assert.match(reply, /^HTTP\/1\.1 200 [^]*\r\n\r\nanswer$/, reply);
  } finally {
    hints.server.close();
  }
});
