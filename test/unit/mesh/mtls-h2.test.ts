import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MeshTls } from '../../../src/mesh/mesh-tls.ts';
import { credentialsFor, fixedSources, testCa } from '../../harness/mesh.ts';
import { grpcHeaders, h2Client, h2Request, startH2Backend } from '../proxy/h2/h2-harness.ts';
import { API, freePort, meshedSidecar, TD, WEB } from './mesh-harness.ts';

/** A sidecar whose plaintext callers all count as other pods (loopback never would). */
async function strictPod(t: { after(fn: () => unknown): void }, appPort: number) {
  const ca = await testCa();
  return meshedSidecar(t, {
    host: '127.0.0.1',
    meshPort: await freePort('127.0.0.1'),
    tls: new MeshTls(fixedSources(await credentialsFor(ca, API), ca.trustBundle), TD),
    mode: 'strict',
    appPorts: [appPort],
    wrap: (w) => ({ ...w, refusePlaintext: () => 'this pod accepts mutual TLS only' }),
  });
}

test('a strict pod refuses plaintext h2c and gRPC from other pods (403, PERMISSION_DENIED)', async (t) => {
  const backend = await startH2Backend();
  t.after(() => backend.close());
  const pod = await strictPod(t, backend.port);
  const session = await h2Client(pod.ingress);
  t.after(() => session.close());
  const call = await h2Request(session, grpcHeaders('api'), 'x');
  assert.equal(call.headers['grpc-status'], '7', JSON.stringify(call.headers));
  assert.equal(call.headers['x-outrigger-error'], 'mesh_caller_denied');
  const plain = await h2Request(session, { ':path': '/', ':authority': 'api' });
  assert.equal(plain.headers[':status'], 403);
  assert.equal(backend.streams.length, 0, 'nothing reached the app');
});

test('the h2c ingress never passes on an x-forwarded-client-cert a plaintext caller sent', async (t) => {
  const backend = await startH2Backend();
  t.after(() => backend.close());
  const ca = await testCa();
  const pod = await meshedSidecar(t, {
    host: '127.0.0.1',
    meshPort: await freePort('127.0.0.1'),
    tls: new MeshTls(fixedSources(await credentialsFor(ca, API), ca.trustBundle), TD),
    appPorts: [backend.port],
  });
  const session = await h2Client(pod.ingress);
  t.after(() => session.close());
  const r = await h2Request(
    session,
    grpcHeaders('api', undefined, { 'x-forwarded-client-cert': `URI=${WEB}` }),
    'x',
  );
  assert.equal(r.trailers['grpc-status'], '0', JSON.stringify(r));
  assert.equal(backend.streams[0]?.['x-forwarded-client-cert'], undefined);
});
