import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ep, service } from '../../routing/fixtures.ts';
import { metric, startProxy, type Proxy } from '../harness.ts';
import {
  clientVia,
  grpc,
  startGrpcBackend,
  unary,
  type GrpcBackend,
  type Msg,
  type TestClient,
} from '../../../harness/grpc.ts';

let backends: GrpcBackend[];
let proxy: Proxy;
let client: TestClient;

before(async () => {
  backends = [await startGrpcBackend(), await startGrpcBackend(), await startGrpcBackend()];
  // A short request and idle timeout: gRPC streams must outlive both.
  proxy = await startProxy({ requestTimeoutMs: 300, idleTimeoutMs: 300 });
  proxy.resolver.set(
    service('prod', 'grpc', { eps: { http: backends.map((b) => ep('127.0.0.1', b.port)) } }),
  );
  proxy.resolver.set(service('prod', 'empty', { eps: { http: [] } }));
  client = clientVia(proxy.egress, 'grpc.prod:80');
});

after(async () => {
  client.close();
  await proxy.close();
  for (const b of backends) await b.close();
});

test('calls over one client connection are balanced per call across the endpoints', async () => {
  const before = backends.map((b) => b.calls);
  const byPort = new Map<number, number>();
  for (let i = 0; i < 90; i++) {
    const r = await unary(client, { text: `call ${i}` });
    assert.equal(r.error, undefined);
    assert.equal(r.reply?.text, `call ${i}`);
    const port = r.reply?.port ?? 0;
    byPort.set(port, (byPort.get(port) ?? 0) + 1);
  }
  // Round robin in this harness: each endpoint serves exactly a third.
  assert.deepEqual(
    backends.map((b, i) => b.calls - (before[i] ?? 0)),
    [30, 30, 30],
  );
  assert.equal(byPort.size, 3);
  assert.equal(proxy.dp.sidecar.connections().h2Sessions, 1, 'the client used one connection');
});

test('server streaming, client streaming and bidi calls pass whole', async () => {
  const got: Msg[] = [];
  await new Promise<void>((resolve, reject) => {
    const s = client.serverStream({ text: 's', count: 5 });
    s.on('data', (m: Msg) => got.push(m));
    s.on('error', reject);
    s.on('end', resolve);
  });
  assert.deepEqual(
    got.map((m) => m.text),
    ['s0', 's1', 's2', 's3', 's4'],
  );
  const sum = await new Promise<Msg>((resolve, reject) => {
    const w = client.clientStream(new grpc.Metadata(), {}, (e, r) => (e ? reject(e) : resolve(r as Msg)));
    for (const t of ['a', 'b', 'c', 'd']) w.write({ text: t });
    w.end();
  });
  assert.equal(sum.text, 'abcd');
  assert.equal(sum.count, 4);
  const echoed: string[] = [];
  await new Promise<void>((resolve, reject) => {
    const d = client.bidi();
    const texts = ['x', 'y', 'z'];
    let i = 0;
    // Ping-pong: each request is written after the previous echo came back through the proxy.
    d.on('data', (m: Msg) => {
      echoed.push(m.text ?? '');
      if (++i < texts.length) d.write({ text: texts[i] });
      else d.end();
    });
    d.on('error', reject);
    d.on('end', resolve);
    d.write({ text: texts[0] });
  });
  assert.deepEqual(echoed, ['x', 'y', 'z']);
});

test("an upstream's status, message, trailers and binary metadata reach the client unchanged", async () => {
  const md = new grpc.Metadata();
  const bin = Buffer.from([0, 1, 2, 250, 255, 10, 13]);
  md.set('x-echo-bin', bin);
  const ok = await unary(client, { text: 'meta' }, md);
  assert.equal(ok.error, undefined);
  assert.deepEqual(ok.trailers?.get('x-echo-bin'), [bin]);
  assert.equal(ok.trailers?.get('x-port')[0], String(ok.reply?.port));
  const failed = await unary(client, { text: 'ünïcode %', failCode: grpc.status.PERMISSION_DENIED }, md);
  assert.equal(failed.error?.code, grpc.status.PERMISSION_DENIED);
  assert.equal(failed.error?.details, 'failed as asked: ünïcode %');
  assert.deepEqual(failed.error?.metadata.get('x-echo-bin'), [bin]);
  assert.deepEqual(failed.error?.metadata.get('x-outrigger-error'), [], 'not marked as a proxy error');
  assert.equal(
    await metric(proxy, 'outrigger_grpc_calls_total', {
      direction: 'egress',
      service: 'prod/grpc',
      grpc_status: '7',
    }),
    1,
  );
});

test('a Service without endpoints is UNAVAILABLE, with the proxy error code', async () => {
  const c = clientVia(proxy.egress, 'empty.prod:80');
  try {
    const r = await unary(c, { text: 'x' });
    assert.equal(r.error?.code, grpc.status.UNAVAILABLE);
    assert.match(r.error?.details ?? '', /no ready endpoints/);
    assert.deepEqual(r.error?.metadata.get('x-outrigger-error'), ['no_endpoints']);
    assert.equal(
      await metric(proxy, 'outrigger_grpc_calls_total', { service: 'prod/empty', grpc_status: '14' }),
      1,
    );
  } finally {
    c.close();
  }
});

test('a long server stream outlives the request and idle timeouts', async () => {
  const got: Msg[] = [];
  const status = await new Promise<grpc.StatusObject>((resolve) => {
    // 3 messages 400 ms apart: longer than both the 300 ms request timeout and idle timeout.
    const s = client.serverStream({ text: 'slow', count: 3, intervalMs: 400 });
    s.on('data', (m: Msg) => got.push(m));
    s.on('error', () => {});
    s.on('status', resolve);
  });
  assert.equal(status.code, grpc.status.OK);
  assert.equal(got.length, 3);
});
