import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { constants, type ServerHttp2Stream } from 'node:http2';
import { ep, service } from '../../routing/fixtures.ts';
import { counted, startProxy, type Proxy } from '../harness.ts';
import type { ServerLimits } from '../../../../src/proxy/server.ts';
import { h2Client, h2Request, startH2Backend, type H2Backend } from './h2-harness.ts';
import { errorCodeOf, FrameType, headersFrames, rawClient, Setting, settingsOf } from './frames.ts';

/**
 * The HTTP/2 listeners apply the HTTP/1.1 limits: the keep-alive idle time to a session with no
 * stream open, the upload idle time to a request body, the header size and count limits, plus a
 * bound on the streams one connection may hold open. Small limits here; deadlines are generous.
 */
const closers: (() => Promise<void> | void)[] = [];

after(async () => {
  for (const c of closers.reverse()) await c();
});

async function backend(handle: (s: ServerHttp2Stream) => void): Promise<H2Backend> {
  const b = await startH2Backend((s) => handle(s));
  closers.push(() => b.close());
  return b;
}

async function proxyFor(b: H2Backend, limits: Partial<ServerLimits>): Promise<Proxy> {
  const p = await startProxy({ requestTimeoutMs: 30_000 }, { limits });
  closers.push(() => p.close());
  p.resolver.set(service('prod', 'web', { eps: { http: [ep('127.0.0.1', b.port)] } }));
  return p;
}

/** Reads the request body to its end, then answers `ok` after ms. */
const answerAfter =
  (ms: number) =>
  (s: ServerHttp2Stream): void => {
    s.resume();
    s.once('end', () => {
      const t = setTimeout(() => {
        s.respond({ ':status': 200 });
        s.end('ok');
      }, ms);
      s.once('close', () => clearTimeout(t));
    });
  };

/** Holds every stream open: reads its body, never answers. */
const hold = (s: ServerHttp2Stream): void => void s.resume();

const request = (path = '/'): Record<string, string> => ({
  ':method': 'POST',
  ':path': path,
  ':authority': 'web.prod',
});

test('an h2c session with no stream open is closed after the keep-alive idle time; open streams keep it', async () => {
  const b = await backend(answerAfter(1_000));
  const p = await proxyFor(b, { keepAliveTimeoutMs: 300 });
  // Never sends a request: closed like an idle HTTP/1.1 keep-alive connection.
  const silent = await h2Client(p.egress);
  const closed = await new Promise<boolean>((resolve) => {
    const t = setTimeout(() => resolve(false), 10_000);
    silent.once('close', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
  silent.destroy();
  assert.ok(closed, 'the silent session was still open after 10 s');
  // A stream outliving the idle time three times over is answered on the same session.
  const busy = await h2Client(p.egress);
  let goaway = false;
  busy.once('goaway', () => (goaway = true));
  const r = await h2Request(busy, request(), 'x');
  assert.equal(r.headers[':status'], 200);
  assert.equal(r.body.toString(), 'ok');
  assert.equal(goaway, false, 'no GOAWAY while a stream was open');
  const idleAfter = await new Promise<boolean>((resolve) => {
    const t = setTimeout(() => resolve(false), 10_000);
    busy.once('close', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
  busy.destroy();
  assert.ok(idleAfter, 'closed once idle again');
});

test('a request body that stops arriving is answered 408 and the stream ended; the upstream stream is cancelled', async () => {
  let upstreamClosed!: (code: number | undefined) => void;
  const upstreamReset = new Promise<number | undefined>((r) => (upstreamClosed = r));
  const b = await backend((s) => {
    s.resume();
    s.once('close', () => upstreamClosed(s.rstCode));
  });
  const p = await proxyFor(b, { uploadIdleTimeoutMs: 300 });
  const c = await h2Client(p.egress);
  try {
    const s = c.request(request('/stalled'));
    s.write('part of the body');
    let headers: Record<string, unknown> = {};
    s.once('response', (h) => (headers = h));
    s.on('data', () => {});
    s.on('error', () => {});
    const closed = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(false), 10_000);
      s.once('close', () => {
        clearTimeout(t);
        resolve(true);
      });
    });
    assert.deepEqual(
      { status: headers[':status'], error: headers['x-outrigger-error'], rst: s.rstCode, closed },
      { status: 408, error: 'request_timeout', rst: constants.NGHTTP2_NO_ERROR, closed: true },
    );
  } finally {
    c.destroy();
  }
  assert.equal(await upstreamReset, constants.NGHTTP2_CANCEL);
  assert.equal(await counted(p, { status: '408', error: 'request_timeout' }, 1), 1);
});

test('a request body that stops once the response has started gets its stream reset (CANCEL)', async () => {
  const b = await backend((s) => {
    s.resume();
    s.respond({ ':status': 200 });
    s.write('streaming');
  });
  const p = await proxyFor(b, { uploadIdleTimeoutMs: 300 });
  const c = await h2Client(p.egress);
  try {
    const s = c.request(request('/bidi'));
    s.write('part');
    s.on('data', () => {});
    s.on('error', () => {});
    const rst = await new Promise<number | undefined>((resolve) => {
      const t = setTimeout(() => resolve(undefined), 10_000);
      s.once('close', () => {
        clearTimeout(t);
        resolve(s.rstCode);
      });
    });
    assert.equal(rst, constants.NGHTTP2_CANCEL);
  } finally {
    c.destroy();
  }
});

test('request headers above the size limit are refused (431, or RST_STREAM once SETTINGS are acknowledged); so are too many', async () => {
  const b = await backend(answerAfter(0));
  const p = await proxyFor(b, { maxHeaderBytes: 4_096, maxHeaders: 20 });
  const big = (id: number): Buffer =>
    headersFrames(
      id,
      [
        [':method', 'GET'],
        [':scheme', 'http'],
        [':path', `/big${id}`],
        [':authority', 'web.prod'],
        ['x-big', 'a'.repeat(8_000)],
      ],
      true,
    );
  // Sent with the preface, before the server's SETTINGS can have been acknowledged: node:http2
  // does not apply its setting yet, the listener's own check answers.
  const early = await rawClient(p.egress, big(1));
  closers.push(() => early.close());
  const answer = await early.waitFor(
    (f) => (f.type === FrameType.HEADERS || f.type === FrameType.RST_STREAM) && f.stream === 1,
  );
  assert.equal(answer?.type, FrameType.HEADERS, 'stream 1 was answered');
  assert.equal(await counted(p, { status: '431', error: 'headers_too_large' }, 1), 1);
  // After the acknowledgement node:http2 resets the stream itself (RFC 9113 section 6.5.3).
  const raw = await rawClient(p.egress);
  closers.push(() => raw.close());
  const settings = await raw.waitFor((f) => f.type === FrameType.SETTINGS && f.flags === 0);
  assert.ok(settings, 'server SETTINGS');
  assert.equal(settingsOf(settings).get(Setting.MAX_HEADER_LIST_SIZE), 4_096);
  raw.write(big(1));
  const refused = await raw.waitFor(
    (f) => (f.type === FrameType.RST_STREAM && f.stream === 1) || f.type === FrameType.GOAWAY,
  );
  assert.ok(refused, 'stream 1 was neither reset nor the connection closed');
  assert.equal(errorCodeOf(refused), constants.NGHTTP2_ENHANCE_YOUR_CALM);
  // More header fields than HTTP/1.1 takes: the same 431 and error code.
  const c = await h2Client(p.egress);
  try {
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`x-h${i}`, 'v']));
    const r = await h2Request(c, { ...request('/many'), ...many }, 'x');
    assert.equal(r.headers[':status'], 431);
    assert.equal(r.headers['x-outrigger-error'], 'headers_too_large');
    const fine = await h2Request(c, { ...request('/fine'), 'x-small': 'v' }, 'x');
    assert.equal(fine.headers[':status'], 200);
  } finally {
    c.close();
  }
  assert.deepEqual(
    b.streams.map((h) => h[':path']),
    ['/fine'],
  );
});

test('the stream cap is advertised in SETTINGS and a stream above it is refused (REFUSED_STREAM)', async () => {
  const b = await backend(hold);
  const p = await proxyFor(b, { maxConcurrentStreams: 2 });
  const raw = await rawClient(p.egress);
  closers.push(() => raw.close());
  const open = (id: number): Buffer =>
    headersFrames(
      id,
      [
        [':method', 'POST'],
        [':scheme', 'http'],
        [':path', `/s${id}`],
        [':authority', 'web.prod'],
      ],
      false,
    );
  // One write, so all three arrive together: the cap, not timing, decides.
  raw.write(Buffer.concat([open(1), open(3), open(5)]));
  const reset = await raw.waitFor((f) => f.type === FrameType.RST_STREAM && f.stream === 5);
  assert.ok(reset, 'stream 5 was not reset');
  assert.equal(errorCodeOf(reset), constants.NGHTTP2_REFUSED_STREAM);
  // The two streams under the cap went upstream.
  for (let i = 0; i < 100 && b.streams.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(b.streams.map((h) => h[':path']).sort(), ['/s1', '/s3']);
  assert.equal(
    raw.frames.some((f) => f.type === FrameType.RST_STREAM && f.stream !== 5),
    false,
  );
  const settings = raw.frames.find((f) => f.type === FrameType.SETTINGS && f.flags === 0);
  assert.ok(settings, 'server SETTINGS');
  assert.equal(settingsOf(settings).get(Setting.MAX_CONCURRENT_STREAMS), 2);
});

test('by default the listeners advertise 100 streams and the HTTP/1.1 header limit of 16 KiB', async () => {
  const b = await backend(hold);
  const p = await proxyFor(b, {});
  for (const port of [p.egress, p.ingress]) {
    const raw = await rawClient(port);
    closers.push(() => raw.close());
    const settings = await raw.waitFor((f) => f.type === FrameType.SETTINGS && f.flags === 0);
    assert.ok(settings, 'server SETTINGS');
    const s = settingsOf(settings);
    assert.equal(s.get(Setting.MAX_CONCURRENT_STREAMS), 100);
    assert.equal(s.get(Setting.MAX_HEADER_LIST_SIZE), 16 * 1024);
  }
});
