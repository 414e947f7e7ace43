// HTTP/2 and gRPC through `outrigger gateway --gateway-api`, against the real API server with the
// published Gateway API CRDs, backends on pod IPs inside a network namespace:
//   1. gRPC (grpc-js, prior-knowledge h2c) through the gateway's plaintext port to grpc-js backends
//      whose Service port says appProtocol kubernetes.io/h2c: unary and server-streaming calls,
//      the backend's trailers and a failed call's status passed through, a header match applied;
//   2. an HTTP/1.1 client's call to the same h2c-only backends, translated to a stream and back;
//   3. on the same port, a plain h2c request and an HTTP/1.1 one reach an HTTP/1.1 backend, a
//      prefix rewrite applied to both.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { createService, createSlice, waitFor } from '../harness/discovery.ts';
import { GATEWAY_PORTS, gatewayPod } from '../harness/gateway.ts';
import { backendTo, edgeGateway, gatewayApiCluster, grpcService, httpRoute } from '../harness/gateway-api.ts';
import { repoRoot } from '../harness/tools.ts';

const RPC_A = '10.244.0.121';
const RPC_B = '10.244.0.122';
const WEB = '10.244.0.123';
const GRPC_PORT = 9090;
const grpcHarness = path.join(repoRoot, 'test/harness/grpc.ts');

/** What the gRPC client in the pod saw (grpc-js through the gateway's HTTP port). */
interface Calls {
  plain: { servedBy?: string; code: number; port?: string };
  laneB: { servedBy?: string; code: number };
  failed: { code: number; details: string; port?: string };
  stream: { texts: string[]; code: number; port?: string };
}

const grpcCalls = `import(${JSON.stringify(grpcHarness)}).then(async ({ clientVia, unary, grpc }) => {
  const c = clientVia(${GATEWAY_PORTS.http}, 'rpc.example.com');
  const port = (t) => t?.get('x-port')[0];
  const a = await unary(c, { text: 'hi' });
  const md = new grpc.Metadata(); md.set('x-lane', 'b');
  const b = await unary(c, { text: 'hi' }, md);
  const f = await unary(c, { text: 'no', failCode: 7 });
  const texts = []; let status;
  await new Promise((resolve) => {
    const s = c.serverStream({ text: 's', count: 3, intervalMs: 10 });
    s.on('data', (m) => texts.push(m.text));
    s.on('status', (st) => { status = st; resolve(); });
    s.on('error', () => {});
  });
  process.stdout.write(JSON.stringify({
    plain: { servedBy: a.reply?.servedBy, code: a.error?.code ?? 0, port: port(a.trailers) },
    laneB: { servedBy: b.reply?.servedBy, code: b.error?.code ?? 0 },
    failed: { code: f.error?.code ?? 0, details: f.error?.details ?? '', port: port(f.trailers) },
    stream: { texts, code: status.code, port: port(status.metadata) },
  }));
  c.close();
})`;

/** One prior-knowledge h2c GET to the gateway's HTTP port: status, body, the backend's x-path. */
const h2Get = (authority: string, target: string): string =>
  `const s=require('http2').connect('http://127.0.0.1:${GATEWAY_PORTS.http}');s.on('error',e=>{process.stdout.write(JSON.stringify({status:0,body:e.message}));process.exit(0)});const r=s.request({':path':${JSON.stringify(target)},':authority':${JSON.stringify(authority)}});let h={},b='';r.on('response',x=>h=x);r.on('data',d=>b+=d);r.on('end',()=>{process.stdout.write(JSON.stringify({status:h[':status'],body:b,path:h['x-path']??'',error:h['x-outrigger-error']??''}));s.close()});r.end()`;

/** An HTTP/1.1 POST of an empty gRPC message to the gateway: status, the reply's bytes, its trailers. */
const h1Grpc = (authority: string, target: string): string =>
  `const r=require('http').request({host:'127.0.0.1',port:${GATEWAY_PORTS.http},method:'POST',path:${JSON.stringify(target)},headers:{host:${JSON.stringify(authority)},'content-type':'application/grpc',te:'trailers'}},res=>{const c=[];res.on('data',d=>c.push(d));res.on('end',()=>process.stdout.write(JSON.stringify({status:res.statusCode,bytes:Buffer.concat(c).length,grpcStatus:res.trailers['grpc-status']??res.headers['grpc-status']??'',port:res.trailers['x-port']??''})))});r.on('error',e=>process.stdout.write(JSON.stringify({status:0,bytes:0,grpcStatus:e.message,port:''})));r.end(Buffer.alloc(5))`;

test('gateway HTTP/2: gRPC to h2c backends with trailers, h2c and HTTP/1.1 to an HTTP/1.1 backend', async (t) => {
  const env = await gatewayApiCluster(t, 'gwh2');
  if (!env) return;
  const { cluster, ns } = env;
  const admin = cluster.admin;
  await grpcService(admin, ns, 'rpc-a', RPC_A, GRPC_PORT, true);
  await grpcService(admin, ns, 'rpc-b', RPC_B, GRPC_PORT, true);
  await createService(admin, ns, 'web');
  await createSlice(admin, ns, 'web', 'web-1', [WEB]);
  await admin.apply(edgeGateway());
  await admin.apply(
    httpRoute(ns, 'rpc', {
      hostnames: ['rpc.example.com'],
      rules: [
        { backendRefs: [backendTo('rpc-a')] },
        { matches: [{ headers: [{ name: 'x-lane', value: 'b' }] }], backendRefs: [backendTo('rpc-b')] },
      ],
    }),
  );
  await admin.apply(
    httpRoute(ns, 'web', {
      hostnames: ['web.example.com'],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/legacy' } }],
          filters: [
            {
              type: 'URLRewrite',
              urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/v2' } },
            },
          ],
          backendRefs: [backendTo('web')],
        },
      ],
    }),
  );

  const pod = await gatewayPod(cluster, cluster.server);
  t.after(() => pod.close());
  await pod.startGrpcBackend(RPC_A, GRPC_PORT);
  await pod.startGrpcBackend(RPC_B, GRPC_PORT);
  await pod.startBackend(WEB);
  const gateway = await pod.startGateway(['--gateway-api', 'true']);
  t.after(() => gateway.stop('SIGKILL'));
  await waitFor('gateway ready', async () => (await pod.admin('/readyz')).status === 200, 30_000);
  await waitFor(
    'routes served',
    async () => (await pod.get('http://web.example.com/legacy/x')).status === 200,
    15_000,
  );

  await t.test(
    'gRPC through the gateway to h2c backends: replies, trailers, a failed status, a header match',
    async () => {
      const calls = await pod.nodeJson<Calls>(grpcCalls);
      assert.deepEqual(calls.plain, { servedBy: `${RPC_A}:${GRPC_PORT}`, code: 0, port: String(GRPC_PORT) });
      assert.deepEqual(
        calls.laneB,
        { servedBy: `${RPC_B}:${GRPC_PORT}`, code: 0 },
        'the x-lane header match',
      );
      assert.equal(calls.failed.code, 7, 'the backend status, from its trailers');
      assert.match(calls.failed.details, /failed as asked/);
      assert.equal(calls.failed.port, String(GRPC_PORT), "a failed call's trailers too");
      assert.deepEqual(calls.stream, { texts: ['s0', 's1', 's2'], code: 0, port: String(GRPC_PORT) });
    },
  );

  await t.test(
    'an HTTP/1.1 client to an h2c-only backend (grpc-js): translated to a stream and back',
    async () => {
      const r = await pod.nodeJson<{ status: number; bytes: number; grpcStatus: string; port: string }>(
        h1Grpc('rpc.example.com', '/outrigger.v1.TestService/Unary'),
      );
      assert.equal(r.status, 200);
      assert.ok(r.bytes > 5, `a reply message (${r.bytes} bytes)`);
      assert.deepEqual([r.grpcStatus, r.port], ['0', String(GRPC_PORT)], 'the trailers, as chunked trailers');
    },
  );

  await t.test(
    'h2c and HTTP/1.1 on one port to an HTTP/1.1 backend, the rewrite applied to both',
    async () => {
      const h2 = await pod.nodeJson<{ status: number; body: string; path: string; error: string }>(
        h2Get('web.example.com', '/legacy/item?x=1'),
      );
      assert.deepEqual(h2, { status: 200, body: WEB, path: '/v2/item?x=1', error: '' });
      const h1 = await pod.get('http://web.example.com/legacy/item?x=1');
      assert.deepEqual([h1.status, h1.body, h1.path], [200, WEB, '/v2/item?x=1']);
      const miss = await pod.nodeJson<{ status: number; error: string }>(h2Get('nothing.example.com', '/'));
      assert.deepEqual([miss.status, miss.error], [404, 'no_route']);
    },
  );
});
