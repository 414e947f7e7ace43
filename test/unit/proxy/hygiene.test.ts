import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ep, service } from '../routing/fixtures.ts';
import { metric, raw, send, startBackend, startProxy, type Backend, type Proxy } from './harness.ts';

let backend: Backend;
let proxy: Proxy;

before(async () => {
  backend = await startBackend();
  proxy = await startProxy(
    {},
    { limits: { headersTimeoutMs: 300, requestTimeoutMs: 600, checkIntervalMs: 100 } },
  );
  proxy.resolver.set(service('prod', 'web', { eps: { http: [ep('127.0.0.1', backend.port)] } }));
});

after(async () => {
  await proxy.close();
  await backend.close();
});

test('header count over the limit answered by the request handler is counted as 431', async () => {
  const headers: Record<string, string> = { host: 'web.prod' };
  for (let i = 0; i < 101; i++) headers[`x-h${i}`] = 'v';
  const r = await send(proxy.egress, { headers }).catch(() => undefined);
  assert.ok(r === undefined || r.status === 431);
});

test('slowloris: a client that never finishes its headers is cut off with 408', async () => {
  const reply = await raw(proxy.egress, `GET / HTTP/1.1\r\nHost: web.prod\r\nX-Slow: `, 10_000);
  assert.ok(!reply.endsWith('<<timeout>>'), 'the connection was closed by the proxy');
  assert.match(reply, /^HTTP\/1\.1 408 /);
  assert.equal(
    await metric(proxy, 'outrigger_requests_total', {
      direction: 'egress',
      status: '408',
      error: 'request_timeout',
    }),
    1,
  );
});

test('a connection that never sends a byte is closed at the headers timeout without a 408, and not counted', async () => {
  const counted = (): Promise<number> =>
    metric(proxy, 'outrigger_requests_total', {
      direction: 'egress',
      status: '408',
      error: 'request_timeout',
    });
  const before = await counted();
  const reply = await raw(proxy.egress, '', 10_000);
  assert.equal(reply, '', 'closed without an answer to a request nobody sent');
  assert.equal(await counted(), before);
});

test('slow body: a request whose body never completes is cut off', async () => {
  const reply = await raw(
    proxy.egress,
    `POST / HTTP/1.1\r\nHost: web.prod\r\nContent-Length: 100\r\n\r\nabc`,
    10_000,
  );
  assert.ok(!reply.endsWith('<<timeout>>'), 'the connection was closed by the proxy');
});

test('a header named __proto__ (CVE-2026-21710 shape) is just a header', async () => {
  const reply = await raw(
    proxy.egress,
    'GET /p HTTP/1.1\r\nHost: web.prod\r\n__proto__: {"x":1}\r\nConnection: close\r\n\r\n',
  );
  assert.match(reply, /^HTTP\/1\.1 200 /);
  assert.equal((await send(proxy.egress, { headers: { host: 'web.prod' } })).status, 200);
});

test('slowloris under transparent capture (sniffed connections) is cut off with 408 too', async () => {
  const p = await startProxy(
    { capture: 'transparent' },
    {
      limits: { headersTimeoutMs: 300, requestTimeoutMs: 600, checkIntervalMs: 100 },
      originalDestination: () => ({ address: '127.0.0.1', port: backend.port }),
      detectTimeoutMs: 100,
    },
  );
  try {
    const reply = await raw(p.egress, `GET / HTTP/1.1\r\nHost: web.prod\r\nX-Slow: `, 10_000);
    assert.ok(!reply.endsWith('<<timeout>>'), 'the connection was closed by the proxy');
    assert.match(reply, /^HTTP\/1\.1 408 /);
  } finally {
    await p.close();
  }
});
