import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ep, service } from '../../routing/fixtures.ts';
import { startProxy, type Proxy } from '../harness.ts';
import {
  grpc,
  startGrpcBackend,
  testService,
  unary,
  type GrpcBackend,
  type TestClient,
} from '../../../harness/grpc.ts';

/**
 * Explicit capture: a gRPC client with grpc_proxy set opens one CONNECT tunnel per target. To a
 * Service port whose appProtocol says h2c (or grpc) the sidecar serves the tunnel's HTTP/2 itself
 * and balances each call; to any other port the tunnel stays an opaque byte stream.
 */
let backends: GrpcBackend[];
let proxy: Proxy;

before(async () => {
  backends = [await startGrpcBackend(), await startGrpcBackend(), await startGrpcBackend()];
  proxy = await startProxy();
  const eps = { grpc: backends.map((b) => ep('127.0.0.1', b.port)) };
  proxy.resolver.set(
    service('prod', 'rpc', {
      ports: [{ name: 'grpc', port: 9000, protocol: 'TCP', appProtocol: 'grpc' }],
      eps,
    }),
  );
  proxy.resolver.set(
    service('prod', 'opaque', { ports: [{ name: 'grpc', port: 9000, protocol: 'TCP' }], eps }),
  );
});

after(async () => {
  await proxy.close();
  for (const b of backends) await b.close();
});

/** A client created with grpc_proxy pointing at the egress listener (grpc-js reads it per channel). */
function viaConnect(target: string): TestClient {
  const Client = grpc.makeGenericClientConstructor(testService, 'TestService');
  process.env.grpc_proxy = `http://127.0.0.1:${proxy.egress}`;
  try {
    return new Client(target, grpc.credentials.createInsecure()) as unknown as TestClient;
  } finally {
    delete process.env.grpc_proxy;
  }
}

async function spread(target: string, n: number): Promise<number[]> {
  const client = viaConnect(target);
  const before = backends.map((b) => b.calls);
  try {
    for (let i = 0; i < n; i++) {
      const r = await unary(client, { text: `c${i}` });
      assert.equal(r.error, undefined, r.error?.message);
    }
  } finally {
    client.close();
  }
  return backends.map((b, i) => b.calls - (before[i] ?? 0));
}

test('inside CONNECT to an h2c Service port, each call is balanced on its own', async () => {
  assert.deepEqual(await spread('rpc.prod:9000', 30), [10, 10, 10]);
});

test('a CONNECT tunnel to a port without appProtocol stays opaque: one connection, one endpoint', async () => {
  const counts = await spread('opaque.prod:9000', 9);
  assert.deepEqual(
    counts.filter((c) => c > 0),
    [9],
  );
});
