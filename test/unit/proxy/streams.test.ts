import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { ep, service } from '../routing/fixtures.ts';
import {
  closedPort,
  exchange,
  metric,
  raw,
  startBackend,
  startProxy,
  type Backend,
  type Proxy,
} from './harness.ts';

let echo: Server;
let echoPort: number;
let proxy: Proxy;
let ws: Backend;

/** A TCP echo server: what a non-HTTP protocol looks like to the proxy. */
before(async () => {
  echo = createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as AddressInfo).port;
  ws = await startBackend();
  ws.server.on('upgrade', (req, socket) => {
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `X-Seen-Upgrade: ${String(req.headers.upgrade)}\r\n\r\n`,
    );
    socket.pipe(socket);
  });
  proxy = await startProxy();
  const dead = await closedPort();
  proxy.resolver.set(
    service('prod', 'tcp', {
      ports: [{ name: 'db', port: 5432, protocol: 'TCP' }],
      eps: { db: [ep('127.0.0.1', dead), ep('127.0.0.1', echoPort)] },
    }),
  );
  proxy.resolver.set(service('prod', 'ws', { eps: { http: [ep('127.0.0.1', ws.port)] } }));
});

after(async () => {
  await proxy.close();
  await ws.close();
  echo.close();
});

test('CONNECT to a Service port tunnels bytes to a balanced endpoint, skipping one that refuses', async () => {
  for (let i = 0; i < 3; i++) {
    const out = await exchange(
      proxy.egress,
      'CONNECT tcp.prod:5432 HTTP/1.1\r\nHost: tcp.prod:5432\r\n\r\n',
      'ping-bytes',
      (s) => s.includes('ping-bytes'),
    );
    assert.match(out, /^HTTP\/1\.1 200 Connection Established\r\n\r\nping-bytes$/);
  }
});

test('CONNECT to a Service with no endpoints is refused with 503 and the code', async () => {
  proxy.resolver.set(service('prod', 'none', { eps: { http: [] } }));
  const reply = await raw(proxy.egress, 'CONNECT none.prod:80 HTTP/1.1\r\nHost: none.prod:80\r\n\r\n');
  assert.match(reply, /^HTTP\/1\.1 503 /);
  assert.match(reply, /x-outrigger-error: no_endpoints/);
  assert.equal(
    await metric(proxy, 'outrigger_requests_total', {
      service: 'prod/none',
      status: '503',
      error: 'no_endpoints',
    }),
    1,
  );
});

test('CONNECT without a port is a 400', async () => {
  const reply = await raw(proxy.egress, 'CONNECT tcp.prod HTTP/1.1\r\nHost: tcp.prod\r\n\r\n');
  assert.match(reply, /^HTTP\/1\.1 400 /);
});

test('WebSocket upgrades pass through and stay open both ways', async () => {
  const out = await exchange(
    proxy.egress,
    'GET /chat HTTP/1.1\r\nHost: ws.prod\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    'frame-bytes',
    (s) => s.includes('frame-bytes'),
  );
  assert.match(out, /^HTTP\/1\.1 101 /);
  assert.match(out, /x-seen-upgrade: websocket/i);
  assert.ok(out.endsWith('frame-bytes'));
});
