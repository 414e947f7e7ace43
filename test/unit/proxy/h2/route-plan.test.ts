// The parts of a forward plan an HTTPRoute sets (its response header edits and its timeouts), as
// the HTTP/2 forwarder honours them: through the gateway's h2c backends and the sidecar's h2 egress.
import assert from 'node:assert/strict';
import { createServer, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { ForwardPlan, Upstream } from '../../../../src/proxy/forward.ts';
import { H2Forwarder } from '../../../../src/proxy/h2/forward.ts';
import { H2SessionPool } from '../../../../src/proxy/h2/session-pool.ts';
import { systemClock } from '../../../../src/shared/clock.ts';
import { noopHop } from '../../../../src/tracing/hop.ts';
import { grpcHeaders, h2Client, h2Request, startH2Backend, type H2Backend } from './h2-harness.ts';

let echo: H2Backend;
let silent: H2Backend;
let front: Http2Server;
let pool: H2SessionPool;
/** The plan the front forwards its next stream with. */
let plan: ForwardPlan;

const planTo = (port: number, extra: Partial<ForwardPlan> = {}): ForwardPlan => {
  const up: Upstream = { id: `127.0.0.1:${port}`, host: '127.0.0.1', port };
  return {
    next: (tried) => (tried.has(up.id) ? undefined : up),
    canTry: (tried) => !tried.has(up.id),
    start: () => Object.assign(() => {}, {}),
    retryStatuses: new Set(),
    maxAttempts: 1,
    ...extra,
  };
};

before(async () => {
  echo = await startH2Backend();
  silent = await startH2Backend(() => {});
  pool = new H2SessionPool({ clock: systemClock, connectTimeoutMs: 1_000 });
  const forwarder = new H2Forwarder({
    pool,
    clock: systemClock,
    responseTimeoutMs: 30_000,
    idleTimeoutMs: 30_000,
  });
  front = createServer();
  front.on('stream', (stream, headers) => {
    const grpc = headers['content-type'] === 'application/grpc';
    const up = { ...headers };
    void forwarder.forward({ down: stream, headers: up, grpc }, plan, noopHop);
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
});

after(async () => {
  pool.close();
  front.close();
  await echo.close();
  await silent.close();
});

const frontPort = (): number => (front.address() as AddressInfo).port;

test("a plan's editResponse edits the upstream's response headers; its trailers pass as they came", async () => {
  plan = planTo(echo.port, {
    editResponse: (h) => {
      h['x-added'] = 'yes';
      delete h['content-type'];
    },
  });
  const s = await h2Client(frontPort());
  const r = await h2Request(s, grpcHeaders('web'), 'ping');
  s.close();
  assert.equal(r.headers['x-added'], 'yes');
  assert.equal(r.headers['content-type'], undefined);
  assert.equal(r.trailers['grpc-status'], '0');
});

test("a plan's request and attempt timeouts answer 504 upstream_timeout when the upstream is silent", async () => {
  for (const extra of [{ requestTimeoutMs: 100 }, { attemptTimeoutMs: 100 }]) {
    plan = planTo(silent.port, extra);
    const s = await h2Client(frontPort());
    const started = Date.now();
    const r = await h2Request(s, { ':method': 'GET', ':path': '/', ':authority': 'web' });
    s.close();
    assert.deepEqual(
      [r.headers[':status'], r.headers['x-outrigger-error']],
      [504, 'upstream_timeout'],
      JSON.stringify(extra),
    );
    assert.ok(Date.now() - started < 5_000);
  }
});
