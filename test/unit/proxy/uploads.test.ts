import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { ep, service } from '../routing/fixtures.ts';
import {
  eventually,
  metric,
  startProxy,
  startRecorder,
  type Backend,
  type Proxy,
  type Received,
} from './harness.ts';

/**
 * Uploads: the response timeout (--request-timeout) starts once the request has been sent
 * upstream, so a slow upload is not a 504 while the upstream is still reading it; an upload is
 * bounded by idleness (--idle-timeout without a byte), not by a whole-request deadline.
 */
let app: Backend & { got: Received[] };
let proxy: Proxy;

before(async () => {
  app = await startRecorder();
  // Gaps between chunks (100 ms) stay far below the idle timeout, so load cannot turn them into stalls.
  proxy = await startProxy({ requestTimeoutMs: 400, idleTimeoutMs: 1_000 });
  proxy.resolver.set(service('prod', 'up', { eps: { http: [ep('127.0.0.1', app.port)] } }));
});

after(async () => {
  await proxy.close();
  await app.close();
});

/**
 * Sends a Content-Length upload in `chunks` pieces `gapMs` apart, or only `sendChunks` of them
 * (then stays silent); resolves with what came back when the proxy closes (bounded).
 */
function upload(o: { chunks: number; gapMs: number; sendChunks?: number }): Promise<string> {
  const piece = 'x'.repeat(10);
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port: proxy.egress });
    let got = '';
    const limit = setTimeout(() => s.destroy(), 8_000);
    s.setEncoding('latin1');
    s.on('data', (c: string) => (got += c));
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(limit);
      resolve(got || '<<closed without an answer>>');
    });
    s.write(
      `POST /upload HTTP/1.1\r\nHost: up.prod\r\nContent-Length: ${o.chunks * piece.length}\r\n` +
        'Connection: close\r\n\r\n',
    );
    let sent = 0;
    const next = (): void => {
      if (sent >= (o.sendChunks ?? o.chunks) || s.destroyed) return;
      s.write(piece);
      sent++;
      setTimeout(next, o.gapMs);
    };
    next();
  });
}

test('an upload slower than the response timeout is answered, not a 504', async () => {
  app.got.length = 0;
  const reply = await upload({ chunks: 12, gapMs: 100 });
  assert.match(reply, /^HTTP\/1\.1 200 /, reply);
  assert.deepEqual(
    app.got.map((r) => r.body),
    ['x'.repeat(120)],
  );
});

test('an upload longer than the idle timeout that never pauses that long is answered', async () => {
  app.got.length = 0;
  const reply = await upload({ chunks: 15, gapMs: 100 });
  assert.match(reply, /^HTTP\/1\.1 200 /, reply);
  assert.deepEqual(
    app.got.map((r) => r.body),
    ['x'.repeat(150)],
  );
});

test('an upload that stalls for the idle timeout is cut off with a 408', async () => {
  app.got.length = 0;
  const reply = await upload({ chunks: 10, gapMs: 50, sendChunks: 3 });
  assert.match(reply, /^HTTP\/1\.1 408 /, reply);
  assert.match(reply, /x-outrigger-error: request_timeout/i);
  assert.deepEqual(app.got, [], 'the upstream never saw a complete (different) body');
  const counted = (status: string) =>
    metric(proxy, 'outrigger_requests_total', { direction: 'egress', status });
  await eventually('the 408 is counted as such', async () => (await counted('408')) === 1);
  assert.equal(await counted('502'), 0);
});
