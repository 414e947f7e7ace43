// The HTTP/1.1 upstream client (undici dispatch() into the ServerResponse) through the whole
// sidecar: what its error classification, body handling and response copying must keep.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { ep, service } from '../routing/fixtures.ts';
import { metric, send, startBackend, startProxy, type Backend, type Proxy } from './harness.ts';

let proxy: Proxy;
let normal: Backend;
let resetting: Backend;
const resetSeen: string[] = [];

/** Answers the first request on each connection, then resets the connection at the next one. */
function startResetting(seen: string[]): Promise<Backend> {
  const served = new WeakSet<Socket>();
  return startBackend((req, res) => {
    if (served.has(req.socket)) {
      seen.push(req.method ?? '');
      req.socket.destroy();
      return;
    }
    served.add(req.socket);
    res.end('first');
  });
}

before(async () => {
  normal = await startBackend((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => res.end(`got ${body.length}`));
  });
  resetting = await startResetting(resetSeen);
  proxy = await startProxy({ balancer: 'round-robin' });
  const r = proxy.resolver;
  r.set(service('prod', 'web', { eps: { http: [ep('127.0.0.1', normal.port)] } }));
  r.set(
    service('prod', 'rst2', {
      eps: { http: [ep('127.0.0.1', resetting.port), ep('127.0.0.1', normal.port)] },
    }),
  );
});

after(async () => {
  await proxy.close();
  await normal.close();
  await resetting.close();
});

test('a reused connection reset before any response: a GET is retried elsewhere, counted as reset', async () => {
  // Round robin from a fresh Service: resetting, normal, then resetting on its pooled connection.
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++)
    statuses.push((await send(proxy.egress, { headers: { host: 'rst2.prod' } })).status);
  assert.deepEqual(statuses, [200, 200, 200]);
  assert.deepEqual(resetSeen, ['GET'], 'the third request met the reset and was retried');
  assert.equal(await metric(proxy, 'outrigger_retries_total', { service: 'prod/rst2', reason: 'reset' }), 1);
});

test('an endpoint that dies with two GETs in flight: both are retried on the other endpoint', async () => {
  const held: Socket[] = [];
  const dying = await startBackend((req) => void held.push(req.socket));
  proxy.resolver.set(
    service('prod', 'dies', { eps: { http: [ep('127.0.0.1', dying.port), ep('127.0.0.1', normal.port)] } }),
  );
  const retried = (): Promise<number> =>
    metric(proxy, 'outrigger_retries_total', { service: 'prod/dies', reason: 'reset' });
  try {
    // Round robin: the dying endpoint, the normal one, the dying one again (a second connection).
    const first = send(proxy.egress, { headers: { host: 'dies.prod' } });
    while (held.length < 1) await new Promise((r) => setTimeout(r, 10));
    assert.equal((await send(proxy.egress, { headers: { host: 'dies.prod' } })).status, 200);
    const third = send(proxy.egress, { headers: { host: 'dies.prod' } });
    while (held.length < 2) await new Promise((r) => setTimeout(r, 10));
    // One connection closed (FIN), one reset (RST): a process that dies may leave either.
    held[0]?.destroy();
    held[1]?.resetAndDestroy();
    const replies = await Promise.all([first, third]);
    assert.deepEqual(
      replies.map((r) => `${r.status} ${r.body}`),
      ['200 got 0', '200 got 0'],
    );
    assert.equal(await retried(), 2);
  } finally {
    await dying.close();
  }
});

test('a reused connection reset: with no other endpoint a 502, and a POST is never retried', async () => {
  const seen: string[] = [];
  const alone = await startResetting(seen);
  const withOther = await startResetting(seen);
  proxy.resolver.set(service('prod', 'rst', { eps: { http: [ep('127.0.0.1', alone.port)] } }));
  proxy.resolver.set(
    service('prod', 'rstpost', {
      eps: { http: [ep('127.0.0.1', withOther.port), ep('127.0.0.1', normal.port)] },
    }),
  );
  try {
    assert.equal((await send(proxy.egress, { headers: { host: 'rst.prod' } })).status, 200);
    const get = await send(proxy.egress, { headers: { host: 'rst.prod' } });
    assert.equal(get.status, 502);
    assert.equal(get.headers['x-outrigger-error'], 'upstream_failed');
    assert.match(get.body, /reset before any response/);
    // Round robin: the resetting endpoint, the normal one, then the resetting one's pooled
    // connection. A body may have reached the upstream: a reset is not retried though an endpoint is left.
    assert.equal((await send(proxy.egress, { headers: { host: 'rstpost.prod' } })).status, 200);
    assert.equal((await send(proxy.egress, { headers: { host: 'rstpost.prod' } })).status, 200);
    const post = await send(proxy.egress, {
      method: 'POST',
      headers: { host: 'rstpost.prod' },
      body: 'payload',
    });
    assert.equal(post.status, 502);
    assert.match(post.body, /reset/);
    assert.deepEqual(seen, ['GET', 'POST']);
  } finally {
    await alone.close();
    await withOther.close();
  }
});

test('a refused connect is told apart from a reset: retried for any method, its 502 names the refusal', async () => {
  const dead = createServer();
  await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
  const port = (dead.address() as AddressInfo).port;
  await new Promise<void>((r) => dead.close(() => r()));
  proxy.resolver.set(service('prod', 'dead', { eps: { http: [ep('127.0.0.1', port)] } }));
  const r = await send(proxy.egress, { method: 'POST', headers: { host: 'dead.prod' }, body: 'x' });
  assert.equal(r.status, 502);
  assert.match(r.body, /ECONNREFUSED/);
  assert.equal(await metric(proxy, 'outrigger_upstream_connect_errors_total', { service: 'prod/dead' }), 1);
});

/** A request whose response trailers are collected too. */
function withTrailers(
  port: number,
  host: string,
): Promise<{ status: number; body: string; trailers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, trailers: res.trailers }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('trailers of a chunked upstream response reach the client', async () => {
  const b = await startBackend((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum' });
    res.write('part one, ');
    res.write('part two');
    res.addTrailers({ 'x-checksum': 'c0ffee' });
    res.end();
  });
  proxy.resolver.set(service('prod', 'trailers', { eps: { http: [ep('127.0.0.1', b.port)] } }));
  try {
    const r = await withTrailers(proxy.egress, 'trailers.prod');
    assert.equal(r.status, 200);
    assert.equal(r.body, 'part one, part two');
    assert.equal(r.trailers['x-checksum'], 'c0ffee');
  } finally {
    await b.close();
  }
});

test('Expect: 100-continue: the app is asked, its 100 reaches the client, and then the whole body the app', async () => {
  const body = 'z'.repeat(5_000);
  const reply = await new Promise<{ status: number; body: string; continued: boolean }>((resolve, reject) => {
    let continued = false;
    const req = request({
      host: '127.0.0.1',
      port: proxy.egress,
      method: 'PUT',
      headers: { host: 'web.prod', expect: '100-continue', 'content-length': String(body.length) },
      agent: false,
    });
    req.on('continue', () => {
      continued = true;
      req.end(body);
    });
    req.on('response', (res: IncomingMessage) => {
      let got = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (got += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: got, continued }));
    });
    req.on('error', reject);
    req.flushHeaders();
  });
  assert.deepEqual(reply, { status: 200, body: 'got 5000', continued: true });
  const hit = normal.hits.at(-1);
  assert.equal(hit?.method, 'PUT');
  assert.equal(hit?.headers.expect, '100-continue');
});

test('a large response body streams through whole (backpressure both ways)', async () => {
  const chunk = Buffer.alloc(64 * 1024, 'q');
  const b = await startBackend((_req, res) => {
    res.writeHead(200, { 'content-length': String(chunk.length * 64) });
    let n = 0;
    const more = (): void => {
      while (n < 64) {
        n++;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      res.end();
    };
    more();
  });
  proxy.resolver.set(service('prod', 'big', { eps: { http: [ep('127.0.0.1', b.port)] } }));
  try {
    const r = await send(proxy.egress, { headers: { host: 'big.prod' } });
    assert.equal(r.status, 200);
    assert.equal(r.body.length, 4 * 1024 * 1024);
  } finally {
    await b.close();
  }
});

/** A raw upstream that answers every request with `response` and closes. */
async function rawUpstream(response: string): Promise<Server> {
  const srv = createServer((s) => s.once('data', () => s.end(Buffer.from(response, 'latin1'))));
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return srv;
}

test('a response cut mid-body reaches the client incomplete, and the sidecar keeps serving', async () => {
  const srv = await rawUpstream('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b');
  proxy.resolver.set(
    service('prod', 'cut', { eps: { http: [ep('127.0.0.1', (srv.address() as AddressInfo).port)] } }),
  );
  try {
    const r = await send(proxy.egress, { headers: { host: 'cut.prod' } }).then(
      (x) => x.body,
      (e: Error) => e.message,
    );
    assert.notEqual(r.length, 100, 'the client never sees a complete body');
    assert.equal((await send(proxy.egress, { headers: { host: 'web.prod' } })).status, 200);
  } finally {
    srv.close();
  }
});

test('an upstream response header that cannot be forwarded: 502 for that request only', async () => {
  const srv = await rawUpstream('HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\nContent-Length: 2\r\n\r\nok');
  proxy.resolver.set(
    service('prod', 'badhdr', { eps: { http: [ep('127.0.0.1', (srv.address() as AddressInfo).port)] } }),
  );
  try {
    const r = await send(proxy.egress, { headers: { host: 'badhdr.prod' } });
    assert.equal(r.status, 502);
    assert.equal(r.headers['x-outrigger-error'], 'upstream_failed');
    assert.equal((await send(proxy.egress, { headers: { host: 'web.prod' } })).status, 200);
  } finally {
    srv.close();
  }
});

test('a client that goes away cancels its upstream request', async () => {
  let upstreamClosed!: () => void;
  const closed = new Promise<void>((r) => (upstreamClosed = r));
  const b = await startBackend((_req, res) => {
    res.on('close', () => upstreamClosed()); // never answered: only a cancel closes it
  });
  proxy.resolver.set(service('prod', 'slow', { eps: { http: [ep('127.0.0.1', b.port)] } }));
  try {
    const req = request({
      host: '127.0.0.1',
      port: proxy.egress,
      headers: { host: 'slow.prod' },
      agent: false,
    });
    req.on('error', () => {});
    req.end();
    while (b.hits.length === 0) await new Promise((r) => setTimeout(r, 10));
    req.destroy();
    await closed;
    assert.equal((await send(proxy.egress, { headers: { host: 'web.prod' } })).status, 200);
  } finally {
    await b.close();
  }
});

test('a client that stops reading a response is cut off after the idle timeout, and its upstream request is cancelled', async () => {
  const chunk = Buffer.alloc(64 * 1024, 'z');
  let upstreamClosed!: (finished: boolean) => void;
  const closed = new Promise<boolean>((r) => (upstreamClosed = r));
  // An endless body, bounded at 4,096 chunks (256 MiB) that a stalled client never lets it reach.
  const b = await startBackend((_req, res) => {
    res.on('close', () => upstreamClosed(res.writableFinished));
    let n = 0;
    const more = (): void => {
      while (n++ < 4_096) if (!res.write(chunk)) return void res.once('drain', more);
      res.end();
    };
    more();
  });
  const stalling = await startProxy({ idleTimeoutMs: 300 });
  stalling.resolver.set(service('prod', 'endless', { eps: { http: [ep('127.0.0.1', b.port)] } }));
  try {
    const res = await new Promise<IncomingMessage>((resolve, reject) =>
      request({ port: stalling.egress, headers: { host: 'endless.prod' } }, resolve)
        .on('error', reject)
        .end(),
    );
    assert.equal(res.statusCode, 200);
    res.pause(); // and never read again
    res.on('error', () => {});
    assert.equal(await closed, false, 'the upstream response was cancelled, not finished');
    assert.equal(
      (await send(stalling.egress, { headers: { host: 'endless.prod' }, method: 'HEAD' })).status,
      200,
    );
    res.destroy();
  } finally {
    await stalling.close();
    await b.close();
  }
});
