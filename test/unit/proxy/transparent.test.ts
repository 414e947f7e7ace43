import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import type { Destination } from '../../../src/proxy/capture-port.ts';
import { classify } from '../../../src/proxy/sniff.ts';
import { ep, service } from '../routing/fixtures.ts';
import {
  closedPort,
  send,
  startBackend,
  startProxy,
  tcpExchange,
  type Backend,
  type Proxy,
} from './harness.ts';

/**
 * Transparent-mode routing with the original destination injected (the real getsockopt path is
 * the capture engineer's, tested in network namespaces): ClusterIP routing, passthrough, the
 * stale-and-all-ejected fallback, and non-HTTP sniffing.
 */
let backend: Backend;
let fallback: Backend;
let echo: Server;
let proxy: Proxy;
let original: Destination | undefined;

before(async () => {
  backend = await startBackend();
  fallback = await startBackend((_q, res) => res.end('original destination'));
  echo = createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  proxy = await startProxy(
    { capture: 'transparent' },
    {
      originalDestination: () => original,
      detectTimeoutMs: 100,
      // 127.0.0.2 plays the pod IP in the ingress test below.
      isPodAddress: (a) => a === '127.0.0.2',
    },
  );
  proxy.resolver.set(
    service('prod', 'web', { clusterIPs: ['10.96.0.7'], eps: { http: [ep('127.0.0.1', backend.port)] } }),
  );
});

after(async () => {
  await proxy.close();
  await backend.close();
  await fallback.close();
  echo.close();
});

test('origin-form requests route by the original destination ClusterIP, not by Host', async () => {
  original = { address: '10.96.0.7', port: 80 };
  const r = await send(proxy.egress, { headers: { host: 'anything.example' } });
  assert.equal(r.status, 200);
  assert.equal(r.body, `hello from ${backend.port}`);
});

test('a destination that is no ClusterIP goes to the original destination', async () => {
  original = { address: '127.0.0.1', port: fallback.port };
  const r = await send(proxy.egress, { headers: { host: 'web.prod' } });
  assert.equal(r.body, 'original destination');
});

test('stale data whose endpoints are all ejected falls back to the original destination', async () => {
  const dead = await closedPort();
  // The "ClusterIP" is loopback here so that the fallback stays on this machine.
  proxy.resolver.set(
    service('prod', 'stale', {
      clusterIPs: ['127.0.0.1'],
      ports: [{ name: 'http', port: fallback.port, protocol: 'TCP' }],
      eps: { http: [ep('127.0.0.1', dead)] },
    }),
    true,
  );
  original = { address: '127.0.0.1', port: fallback.port };
  // Consecutive connect failures (threshold 5) eject the only endpoint...
  for (let i = 0; i < 5; i++) {
    const r = await send(proxy.egress, { headers: { host: 'x' } });
    assert.equal(r.status, 502);
    assert.equal(r.headers['x-outrigger-error'], 'upstream_failed');
  }
  // ...after which the stale Service yields to the cluster's own path (last-known-good fallback).
  const r = await send(proxy.egress, { headers: { host: 'x' } });
  assert.equal(r.status, 200);
  assert.equal(r.body, 'original destination');
  const view = await send(proxy.admin, { path: '/debug/balancer' });
  assert.match(view.body, /"ejected": true/);
  proxy.resolver.services.delete('prod/stale');
});

test('a client that speaks first with something other than HTTP is streamed as TCP', async () => {
  original = { address: '127.0.0.1', port: (echo.address() as AddressInfo).port };
  const out = await tcpExchange(proxy.egress, '\u0000binary', (got) => got.includes('\u0000binary'));
  assert.equal(out, '\u0000binary');
});

test('a server-speaks-first client (silent) is streamed as TCP after the detect timeout', async () => {
  const greeter = createServer((s) => s.end('220 hello\r\n'));
  await new Promise<void>((r) => greeter.listen(0, '127.0.0.1', r));
  original = { address: '127.0.0.1', port: (greeter.address() as AddressInfo).port };
  try {
    const out = await new Promise<string>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port: proxy.egress });
      let got = '';
      const t = setTimeout(() => reject(new Error(`timeout: ${got}`)), 5_000);
      s.setEncoding('latin1');
      s.on('data', (c: string) => (got += c));
      s.on('close', () => {
        clearTimeout(t);
        resolve(got);
      });
      s.on('error', reject);
    });
    assert.equal(out, '220 hello\r\n');
  } finally {
    greeter.close();
  }
});

test('sniffing tells HTTP/1 from text and binary protocols by the whole first line', () => {
  const c = (s: string, final = false) => classify(Buffer.from(s, 'latin1'), final);
  assert.equal(c('GET / HTTP/1.1\r\n'), 'http');
  assert.equal(c('PROPFIND /x HTTP/1.0\n'), 'http');
  assert.equal(c('GET / HT'), 'more');
  assert.equal(c('GET / HT', true), 'http');
  assert.equal(c('PING 42\r\n'), 'tcp');
  assert.equal(c('SET k v\r\n'), 'tcp');
  assert.equal(c('EHLO example.com\r\n'), 'tcp');
  assert.equal(c('PRI * HTTP/2.0\r\n'), 'more');
  // An unfinished preface is an HTTP/1 request line to Node's parser: it answers it (400).
  assert.equal(c('PRI * HTTP/2.0\r\n', true), 'http');
  assert.equal(c('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), 'h2');
  assert.equal(c('\u0016\u0003\u0001'), 'tcp');
  assert.equal(c('*1\r\n$4\r\nPING\r\n'), 'tcp');
  assert.equal(c('', true), 'tcp');
});

test("sniffing agrees with Node's parser: whatever it would read as a request line is HTTP", () => {
  const c = (s: string, final = false) => classify(Buffer.from(s, 'latin1'), final);
  // llhttp skips every CR and LF before the request line.
  for (const before of ['\r\n', '\n', '\r', '\r\r\n\n', '\r\n'.repeat(2_000)])
    assert.equal(c(`${before}GET / HTTP/1.1\r\n`), 'http', JSON.stringify(before.slice(0, 8)));
  assert.equal(c('\r\n'), 'more');
  assert.equal(c('\r\n', true), 'http', 'empty lines may still be followed by a request');
  assert.equal(c('\r\n'.repeat(9_000)), 'http', 'the look stops at the sniff limit');
  assert.equal(c('\r\nPING 42\r\n'), 'tcp');
  for (const line of [
    'M-SEARCH * HTTP/1.1',
    'GET  / HTTP/1.1',
    'GET / HTTP/0.9',
    'GET / HTTP/2.0',
    'QUERY / HTTP/1.1',
  ])
    assert.equal(c(`${line}\r\n`), 'http', line);
  // A line cut short by a pause can still become a request: the parser gets it, not the app.
  assert.equal(c('GET', true), 'http');
  assert.equal(c('M-SEARCH', true), 'http');
  assert.equal(c('\u0016\u0003\u0001', true), 'tcp');
});

test('a Redis-style inline command is streamed as TCP, not answered 400', async () => {
  original = { address: '127.0.0.1', port: (echo.address() as AddressInfo).port };
  const out = await tcpExchange(proxy.egress, 'PING 42\r\n', (got) => got.includes('\r\n'));
  assert.equal(out, 'PING 42\r\n');
});

test('ingress goes to the original destination as it is, so a localhost-only app stays private', async () => {
  // 127.0.0.2 plays the pod IP: the app on it is reached; the one bound to 127.0.0.1 only is not.
  const app = async (host: string, body: string, port = 0) => {
    const server = createHttpServer((_req, res) => res.end(body));
    await new Promise<void>((r) => server.listen(port, host, r));
    const close = () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    return { port: (server.address() as AddressInfo).port, close };
  };
  const localOnly = await app('127.0.0.1', 'local');
  const podApp = await app('127.0.0.2', 'pod ip', localOnly.port);
  try {
    original = { address: '127.0.0.2', port: localOnly.port };
    const r = await send(proxy.ingress, {});
    assert.equal(r.status, 200);
    assert.equal(r.body, 'pod ip');
    await podApp.close();
    const refused = await send(proxy.ingress, {});
    assert.equal(refused.status, 502, 'the app bound to 127.0.0.1 only is not exposed');
  } finally {
    await podApp.close();
    await localOnly.close();
  }
});
