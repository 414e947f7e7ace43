import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { ep, service } from '../routing/fixtures.ts';
import {
  chunkedRequest,
  closedPort,
  metric,
  raw,
  startProxy,
  startRecorder,
  type Backend,
  type Proxy,
  type Received,
} from './harness.ts';

/**
 * A request body reaches the upstream exactly as the client sent it, or the client gets the
 * failure: never an emptied or truncated body with a 200. "Has a body" comes from the framing the
 * client used (chunked or a Content-Length), whatever its Connection header names.
 */
const recorder = (status = 200) =>
  startRecorder((r, res) => {
    res.statusCode = status;
    res.end(`got ${r.body.length}`);
  });

let live: Backend & { got: Received[] };
let busy: Backend & { got: Received[] };
let dead: number;
let proxy: Proxy;

before(async () => {
  live = await recorder();
  busy = await recorder(503);
  dead = await closedPort();
  proxy = await startProxy({ retryStatuses: [503] });
  // Round robin starts with the first endpoint: the refused one, so the first attempt is retried.
  proxy.resolver.set(
    service('prod', 'half', { eps: { http: [ep('127.0.0.1', dead), ep('127.0.0.1', live.port)] } }),
  );
  proxy.resolver.set(
    service('prod', 'busy', { eps: { http: [ep('127.0.0.1', busy.port), ep('127.0.0.1', live.port)] } }),
  );
});

after(async () => {
  await proxy.close();
  await live.close();
  await busy.close();
});

/** Every body any backend received equals what the client sent. */
function assertBodiesIntact(sent: string): void {
  for (const r of [...live.got, ...busy.got])
    assert.equal(r.body, sent, `${r.method} ${r.url} reached a backend with a different body`);
}

test('a chunked body survives a retry after a failed connect', async () => {
  live.got.length = 0;
  const before = await metric(proxy, 'outrigger_retries_total', { reason: 'connect_failure' });
  for (let i = 0; i < 2; i++) {
    const reply = await raw(proxy.egress, chunkedRequest('POST', '/up', 'half.prod', 'payload-chunked'));
    assert.match(reply, /^HTTP\/1\.1 200 /, reply);
  }
  assert.ok((await metric(proxy, 'outrigger_retries_total', { reason: 'connect_failure' })) > before);
  assert.equal(live.got.length, 2);
  assertBodiesIntact('payload-chunked');
});

test('a Content-Length body named by Connection survives a retry after a failed connect', async () => {
  live.got.length = 0;
  for (let i = 0; i < 2; i++) {
    const reply = await raw(
      proxy.egress,
      `POST /cl HTTP/1.1\r\nHost: half.prod\r\nContent-Length: 7\r\nConnection: content-length, close\r\n\r\npayload`,
    );
    assert.match(reply, /^HTTP\/1\.1 200 /, reply);
  }
  assert.equal(live.got.length, 2);
  assertBodiesIntact('payload');
});

for (const method of ['PUT', 'DELETE']) {
  test(`a chunked ${method} answered with a retry status is not retried without its body`, async () => {
    live.got.length = 0;
    busy.got.length = 0;
    for (let i = 0; i < 2; i++) {
      const reply = await raw(proxy.egress, chunkedRequest(method, '/up', 'busy.prod', 'idempotent-body'));
      assert.match(reply, /^HTTP\/1\.1 (200|503) /, reply);
    }
    assert.equal(live.got.length + busy.got.length, 2, 'one upstream request per client request');
    assertBodiesIntact('idempotent-body');
  });
}

test('a chunked DELETE body is framed upstream: its bytes never become a second request', async () => {
  live.got.length = 0;
  const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: half.prod\r\n\r\n';
  proxy.resolver.set(service('prod', 'one', { eps: { http: [ep('127.0.0.1', live.port)] } }));
  const reply = await raw(proxy.egress, chunkedRequest('DELETE', '/up', 'one.prod', smuggled));
  assert.match(reply, /^HTTP\/1\.1 200 /, reply);
  // A request after it on the proxy's pooled connection would be the one to see a smuggled request.
  await raw(proxy.egress, `GET /after HTTP/1.1\r\nHost: one.prod\r\nConnection: close\r\n\r\n`);
  assert.deepEqual(
    live.got.map((r) => r.url),
    ['/up', '/after'],
  );
  assert.equal(live.got[0]?.body, smuggled);
});

/** A raw upstream that records each request's head and body, and answers once the body is in. */
async function headRecorder(): Promise<{
  port: number;
  server: Server;
  got: { head: string; body: string }[];
}> {
  const got: { head: string; body: string }[] = [];
  const server = createServer((s) => {
    s.on('error', () => {});
    let data = '';
    s.setEncoding('latin1');
    s.on('data', (c: string) => {
      data += c;
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = data.slice(0, end);
      const body = data.slice(end + 4);
      const length = /\r\ncontent-length: *(\d+)/i.exec(head);
      const done = /\r\ntransfer-encoding: *chunked/i.test(head)
        ? body.endsWith('0\r\n\r\n')
        : body.length >= Number(length?.[1] ?? 0);
      if (!done) return;
      got.push({ head, body });
      s.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, server, got };
}

for (const [method, size] of [
  ['POST', 0],
  ['DELETE', 0],
  ['POST', 1024],
] as const)
  test(`a chunked ${method} of ${size} bytes reaches the upstream chunked, not with a Content-Length`, async () => {
    const up = await headRecorder();
    proxy.resolver.set(service('prod', 'heads', { eps: { http: [ep('127.0.0.1', up.port)] } }));
    try {
      const body = 'k'.repeat(size);
      const data =
        `${method} /framed HTTP/1.1\r\nHost: heads.prod\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n` +
        (size > 0 ? `${size.toString(16)}\r\n${body}\r\n` : '') +
        '0\r\n\r\n';
      const reply = await raw(proxy.egress, data);
      assert.match(reply, /^HTTP\/1\.1 200 /, reply);
      const head = up.got[0]?.head ?? '';
      assert.match(head, /\r\ntransfer-encoding: chunked/i, head);
      assert.doesNotMatch(head, /\r\ncontent-length:/i, head);
      assert.equal(dechunk(up.got[0]?.body ?? ''), body);
    } finally {
      up.server.close();
    }
  });

/** The data of a chunked body (no extensions or trailers, as the proxy sends it). */
function dechunk(s: string): string {
  let out = '';
  for (let at = 0; ;) {
    const eol = s.indexOf('\r\n', at);
    const n = parseInt(s.slice(at, eol), 16);
    if (!n) return out;
    out += s.slice(eol + 2, eol + 2 + n);
    at = eol + 2 + n + 2;
  }
}
