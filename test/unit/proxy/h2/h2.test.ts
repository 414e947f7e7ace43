import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { constants, type ClientHttp2Stream, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import { ep, service } from '../../routing/fixtures.ts';
import { closedPort, counted, metric, startProxy, type Proxy } from '../harness.ts';
import {
  echo,
  grpcHeaders,
  h2Client,
  h2Request,
  startH2Backend,
  type H2Backend,
  type H2Reply,
} from './h2-harness.ts';

/**
 * The HTTP/2 data path against plain node:http2 backends that misbehave on purpose: GOAWAY,
 * refused streams, a stream limit of 1, silence past a deadline, dead endpoints.
 */
let proxy: Proxy;
const backends: H2Backend[] = [];

async function backend(...a: Parameters<typeof startH2Backend>): Promise<H2Backend> {
  const b = await startH2Backend(...a);
  backends.push(b);
  return b;
}

function route(name: string, ...bs: (H2Backend | number)[]): void {
  proxy.resolver.set(
    service('prod', name, {
      eps: { http: bs.map((b) => ep('127.0.0.1', typeof b === 'number' ? b : b.port)) },
    }),
  );
}

/** n gRPC calls to name, `parallel` at a time, over one client connection. */
async function calls(name: string, n: number, parallel: number, extra = {}): Promise<H2Reply[]> {
  const c = await h2Client(proxy.egress);
  const out: H2Reply[] = [];
  try {
    for (let i = 0; i < n; i += parallel) {
      const batch = Array.from({ length: Math.min(parallel, n - i) }, (_, j) =>
        h2Request(c, grpcHeaders(`${name}.prod`, '/outrigger.v1.TestService/Unary', extra), `m${i + j}`),
      );
      out.push(...(await Promise.all(batch)));
    }
  } finally {
    c.close();
  }
  return out;
}

const ok = (r: H2Reply): boolean => r.trailers['grpc-status'] === '0' && r.rstCode === 0;

/** Answers after ms, like echo. */
const slowEcho =
  (ms: number) =>
  (stream: ServerHttp2Stream, h: Parameters<typeof echo>[1], port: number): void => {
    const t = setTimeout(() => echo(stream, h, port), ms);
    stream.once('close', () => clearTimeout(t));
  };

before(async () => {
  proxy = await startProxy({ requestTimeoutMs: 2_000 });
});

after(async () => {
  await proxy.close();
  for (const b of backends) await b.close();
});

test('an upstream sending GOAWAY mid-traffic fails no call: accepted streams finish, new ones go elsewhere', async () => {
  const sessions = new Set<Http2Session>();
  const goaway = await backend((stream, h, port) => {
    const s = stream.session as Http2Session;
    sessions.add(s);
    slowEcho(20)(stream, h, port);
    // Graceful shutdown after a few streams: GOAWAY(NO_ERROR), streams in flight still answered.
    if (goaway.streams.length % 4 === 0) s.close();
  });
  const steady = await backend();
  route('goaway', goaway, steady);
  const replies = await calls('goaway', 60, 6);
  assert.equal(replies.filter(ok).length, 60, JSON.stringify(replies.filter((r) => !ok(r)).slice(0, 2)));
  assert.ok(sessions.size >= 2, `the proxy reconnected after GOAWAY (${sessions.size} sessions)`);
  assert.ok(goaway.streams.length >= 10);
});

test('streams the upstream refuses (REFUSED_STREAM) are retried on another endpoint', async () => {
  // RFC 9113 section 8.7: a refused stream was not processed, so another endpoint may take it.
  const refuser = await backend((stream) => stream.close(constants.NGHTTP2_REFUSED_STREAM));
  const steady = await backend();
  route('refused', refuser, steady);
  const replies = await calls('refused', 10, 1);
  assert.equal(replies.filter(ok).length, 10, JSON.stringify(replies.filter((r) => !ok(r)).slice(0, 2)));
  assert.ok(refuser.streams.length >= 1, 'the refusing endpoint was tried');
  assert.ok((await metric(proxy, 'outrigger_retries_total', { reason: 'refused_stream' })) >= 1);
});

test('a refused stream is retried with its whole body; a body past 64 KiB is never sent cut', async () => {
  const refuser = await backend((stream) => stream.close(constants.NGHTTP2_REFUSED_STREAM));
  const steady = await backend();
  route('refusedbody', refuser, steady);
  const c = await h2Client(proxy.egress);
  try {
    for (const size of [40 * 1024, 100 * 1024]) {
      const body = Buffer.alloc(size, 'x');
      const before = refuser.streams.length;
      const replies: H2Reply[] = [];
      for (let i = 0; i < 8; i++)
        replies.push(
          await h2Request(c, grpcHeaders('refusedbody.prod', '/outrigger.v1.TestService/Unary'), body),
        );
      assert.ok(refuser.streams.length > before, `the refusing endpoint was tried (${size} bytes)`);
      for (const r of replies)
        if (ok(r)) assert.equal(r.body.length, size, 'a call answered OK carried its whole body');
      if (size <= 64 * 1024) assert.equal(replies.filter(ok).length, 8, 'every call under 64 KiB succeeded');
      else
        assert.ok(
          replies.some((r) => !ok(r)),
          'a call past 64 KiB that was refused is not retried',
        );
    }
  } finally {
    c.close();
  }
});

test("an upstream's stream limit of 1 makes the pool open more sessions, not queue calls", async () => {
  let concurrent = 0;
  let maxConcurrent = 0;
  const sessions = new Set<Http2Session>();
  const one = await backend(
    (stream, h, port) => {
      sessions.add(stream.session as Http2Session);
      concurrent++;
      maxConcurrent = Math.max(maxConcurrent, concurrent);
      stream.once('close', () => concurrent--);
      slowEcho(100)(stream, h, port);
    },
    { maxConcurrentStreams: 1 },
  );
  route('one', one);
  const replies = await calls('one', 4, 4);
  assert.equal(replies.filter(ok).length, 4);
  assert.equal(sessions.size, 4, 'one session per concurrent call');
  assert.equal(maxConcurrent, 4, 'the calls ran at the same time');
});

test('grpc-timeout bounds the upstream call: DEADLINE_EXCEEDED from the proxy, the upstream stream cancelled', async () => {
  let upstreamReset: number | undefined;
  const silent = await backend((stream) => {
    stream.once('close', () => (upstreamReset = stream.rstCode));
  });
  route('silent', silent);
  const c = await h2Client(proxy.egress);
  try {
    const r = await h2Request(
      c,
      grpcHeaders('silent.prod', '/outrigger.v1.TestService/Unary', { 'grpc-timeout': '200m' }),
      'x',
    );
    assert.equal(r.headers[':status'], 200);
    assert.equal(r.headers['grpc-status'], '4');
    assert.equal(r.headers['x-outrigger-error'], 'upstream_timeout');
    assert.match(String(r.headers['grpc-message']), /deadline/);
  } finally {
    c.close();
  }
  // The proxy forwarded the remaining deadline and cancelled the upstream stream.
  assert.match(String(silent.streams[0]?.['grpc-timeout']), /^\d+m$/);
  for (let i = 0; i < 50 && upstreamReset === undefined; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(upstreamReset, constants.NGHTTP2_CANCEL);
});

test('a malformed grpc-timeout is refused with INTERNAL, naming the value', async () => {
  route('any', await backend());
  const c = await h2Client(proxy.egress);
  try {
    const r = await h2Request(c, grpcHeaders('any.prod', '/x.Y/Z', { 'grpc-timeout': '5 seconds' }), 'x');
    assert.equal(r.headers['grpc-status'], '13');
    assert.match(decodeURIComponent(String(r.headers['grpc-message'])), /grpc-timeout "5 seconds"/);
  } finally {
    c.close();
  }
});

test('connect failures: UNAVAILABLE when every endpoint is down, no failed call when one is up', async () => {
  const dead = await closedPort();
  route('dead', dead);
  const [down] = await calls('dead', 1, 1);
  assert.equal(down?.headers['grpc-status'], '14');
  assert.equal(down?.headers['x-outrigger-error'], 'upstream_failed');
  route('halfdead', dead, await backend());
  const replies = await calls('halfdead', 10, 2);
  assert.equal(replies.filter(ok).length, 10);
});

test('HTTP/2 requests that are not gRPC get HTTP statuses for proxy errors, and their bodies both ways', async () => {
  const b = await backend((stream, h) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      stream.respond({ ':status': 201, 'x-path': String(h[':path']) });
      stream.end(`got ${Buffer.concat(chunks).length}`);
    });
  });
  route('plain', b);
  proxy.resolver.set(service('prod', 'nobody', { eps: { http: [] } }));
  const c = await h2Client(proxy.egress);
  try {
    const body = 'z'.repeat(200_000);
    const r = await h2Request(c, { ':method': 'POST', ':path': '/up?q=1', ':authority': 'plain.prod' }, body);
    assert.equal(r.headers[':status'], 201);
    assert.equal(r.headers['x-path'], '/up?q=1');
    assert.equal(r.body.toString(), 'got 200000');
    const e = await h2Request(c, { ':method': 'GET', ':path': '/', ':authority': 'nobody.prod' });
    assert.equal(e.headers[':status'], 503);
    assert.equal(e.headers['x-outrigger-error'], 'no_endpoints');
    assert.match(e.body.toString(), /no ready endpoints/);
  } finally {
    c.close();
  }
});

test('ingress forwards h2c to the app as h2c', async () => {
  const app = await backend();
  const p = await startProxy({ appPorts: [app.port] });
  try {
    const c = await h2Client(p.ingress);
    const r = await h2Request(c, grpcHeaders('app', '/outrigger.v1.TestService/Unary'), 'hi');
    c.close();
    assert.ok(ok(r));
    assert.equal(r.body.toString(), 'hi');
    assert.equal(r.trailers['x-port'], String(app.port));
    assert.equal(app.streams.at(-1)?.te, 'trailers');
  } finally {
    await p.close();
  }
});

test('flow control passes back-pressure: a client that does not read holds the upstream writer', async () => {
  let written = 0;
  let blocked = false;
  const firehose = await backend((stream) => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
    const chunk = Buffer.alloc(64 * 1024);
    const pump = (): void => {
      // Bounded: 256 MiB at most, far more than every window and buffer on the way.
      while (written < 256 * 1024 * 1024 && !stream.destroyed) {
        written += chunk.length;
        if (!stream.write(chunk)) {
          blocked = true;
          stream.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
  route('firehose', firehose);
  const c = await h2Client(proxy.egress);
  try {
    const s = c.request(grpcHeaders('firehose.prod', '/outrigger.v1.TestService/ServerStream'));
    s.end('x');
    s.pause();
    await new Promise<void>((r) => s.once('response', () => r()));
    let last = -1;
    // Until the writer stops advancing (bounded in count).
    for (let i = 0; i < 100 && written !== last; i++) {
      last = written;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(blocked, 'the upstream writer saw back-pressure');
    assert.ok(written < 64 * 1024 * 1024, `${written} bytes written while nobody read`);
    s.close(constants.NGHTTP2_CANCEL);
  } finally {
    c.close();
  }
});

test('transparent capture: an h2c connection is told by its preface and balanced per stream', async () => {
  const a = await backend();
  const b = await backend();
  const p = await startProxy(
    { capture: 'transparent' },
    { originalDestination: () => ({ address: '10.96.0.9', port: 80 }), detectTimeoutMs: 100 },
  );
  p.resolver.set(
    service('prod', 'tp', {
      clusterIPs: ['10.96.0.9'],
      eps: { http: [ep('127.0.0.1', a.port), ep('127.0.0.1', b.port)] },
    }),
  );
  try {
    const c = await h2Client(p.egress);
    const ports = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const r = await h2Request(
        c,
        grpcHeaders('whatever-the-client-says', '/outrigger.v1.TestService/Unary'),
        'x',
      );
      assert.ok(ok(r));
      ports.add(String(r.trailers['x-port']));
    }
    c.close();
    assert.deepEqual([...ports].sort(), [String(a.port), String(b.port)].sort());
  } finally {
    await p.close();
  }
});

test('CONNECT over HTTP/2 is refused with 400, the connection keeps serving', async () => {
  route('after-connect', await backend());
  const c = await h2Client(proxy.egress);
  try {
    const r = await h2Request(c, { ':method': 'CONNECT', ':authority': 'after-connect.prod:80' });
    assert.equal(r.headers[':status'], 400);
    assert.equal(r.headers['x-outrigger-error'], 'bad_request');
    const next = await h2Request(
      c,
      grpcHeaders('after-connect.prod', '/outrigger.v1.TestService/Unary'),
      'x',
    );
    assert.ok(ok(next));
  } finally {
    c.close();
  }
});

test('a finished call leaves nothing of itself on either stream (node:http2 keeps client streams until a full GC)', async () => {
  const b = await backend(echo);
  route('kept', b);
  // The proxy's upstream streams (to the backend's port) and its client-facing ones.
  const ups: ClientHttp2Stream[] = [];
  const downs: ServerHttp2Stream[] = [];
  const onUp = ({ stream }: { stream: ClientHttp2Stream }): void => {
    if (stream.session?.socket.remotePort === b.port) ups.push(stream);
  };
  const onDown = ({ stream }: { stream: ServerHttp2Stream }): void => {
    if (stream.session?.socket.localPort === proxy.egress) downs.push(stream);
  };
  diagnostics.subscribe('http2.client.stream.created', onUp as (m: unknown) => void);
  diagnostics.subscribe('http2.server.stream.created', onDown as (m: unknown) => void);
  try {
    const replies = await calls('kept', 3, 1);
    assert.ok(replies.every(ok));
    assert.equal(await counted(proxy, { service: 'prod/kept' }, 3), 3);
  } finally {
    diagnostics.unsubscribe('http2.client.stream.created', onUp as (m: unknown) => void);
    diagnostics.unsubscribe('http2.server.stream.created', onDown as (m: unknown) => void);
  }
  assert.equal(ups.length, 3);
  assert.equal(downs.length, 3);
  for (const s of [...ups, ...downs]) {
    const left = s.eventNames().flatMap((e) => s.listeners(e).map((f) => `${String(e)}: ${f.name}`));
    // The forwarder's handlers are its private fields, named #on...
    assert.deepEqual(
      left.filter((l) => l.includes('#')),
      [],
    );
  }
  // One shared function watches for END_STREAM, not a closure over each call.
  const [first, second] = ups.map((s) => Object.getOwnPropertyDescriptor(s, 'push')?.value as unknown);
  assert.ok(typeof first === 'function');
  assert.equal(first, second);
});
