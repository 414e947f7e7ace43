import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AllowRule } from '../../../src/config/parse.ts';
import { MeshTls } from '../../../src/mesh/mesh-tls.ts';
import { credentialsFor, fixedSources, testCa } from '../../harness/mesh.ts';
import { echo, grpcHeaders, h2Client, h2Request, startH2Backend } from '../proxy/h2/h2-harness.ts';
import { closedPort, metric } from '../proxy/harness.ts';
import { ep, service } from '../routing/fixtures.ts';
import { API, meshedSidecar, recordingRelay, TD, WEB } from './mesh-harness.ts';

/** A sidecar whose plaintext callers all count as other pods (loopback never would). */
async function strictPod(t: { after(fn: () => unknown): void }, appPort: number) {
  const ca = await testCa();
  return meshedSidecar(t, {
    host: '127.0.0.1',
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

/** Two meshed server pods (127.0.0.2 behind a wire tap, 127.0.0.3), each with an h2c app; a meshed client. */
async function grpcMesh(t: { after(fn: () => unknown): void }, rules: () => AllowRule[] = () => []) {
  const ca = await testCa();
  const apps = [await startH2Backend(echo, {}, '127.0.0.2'), await startH2Backend(echo, {}, '127.0.0.3')];
  t.after(() => Promise.all(apps.map((a) => a.close())));
  const server = async (i: number, host: string, listenPort = 0) =>
    meshedSidecar(t, {
      host,
      listenPort,
      tls: new MeshTls(fixedSources(await credentialsFor(ca, API), ca.trustBundle), TD),
      appPorts: [apps[i]?.port ?? 0],
      allowFrom: rules,
    });
  // The client dials one mesh port: the tap's on 127.0.0.2 and the second server's on 127.0.0.3.
  const tapped = await server(0, '127.0.0.2');
  const wire = await recordingRelay('127.0.0.2', tapped.meshPort, t);
  const servers = [tapped, await server(1, '127.0.0.3', wire.port)];
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: wire.port,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
  });
  client.resolver.set(
    service('shop', 'api', {
      eps: { http: [ep('127.0.0.2', apps[0]?.port ?? 0), ep('127.0.0.3', apps[1]?.port ?? 0)] },
    }),
  );
  const session = await h2Client(client.egress);
  t.after(() => session.close());
  return { apps, servers, client, session, wire };
}

const statsOf = (p: { wiring: { stats(): unknown } }) =>
  p.wiring.stats() as {
    egress: { mtls: number; resumed: number; plaintext: number; notMeshed: number };
    inbound?: { accepted: number; resumed: number; denied: number; protocols: Record<string, number> };
  };

test('gRPC between meshed sidecars: mTLS with ALPN h2, the app sees the caller, every call balanced, only TLS on the wire', async (t) => {
  const { apps, servers, client, session, wire } = await grpcMesh(t);
  const marker = 'marker-5c1e0b';
  for (let i = 0; i < 10; i++) {
    const r = await h2Request(session, grpcHeaders('api.shop'), `${marker}-${i}`);
    assert.equal(r.trailers['grpc-status'], '0', JSON.stringify(r));
    assert.equal(r.body.toString(), `${marker}-${i}`);
  }
  // One client connection, yet both pods served calls: each call is balanced on its own.
  for (const a of apps) {
    assert.ok(
      a.streams.length >= 1,
      `every endpoint served calls: ${apps.map((x) => x.streams.length).join(', ')}`,
    );
    for (const h of a.streams) assert.equal(h['x-forwarded-client-cert'], `By=${API};URI=${WEB}`);
  }
  const bytes = wire();
  assert.equal(bytes[0], 0x16, 'the hop starts with a TLS handshake record');
  assert.equal(bytes.includes(marker), false, 'no message crosses the wire in clear');
  assert.equal(bytes.includes('PRI * HTTP/2.0'), false, 'the h2 preface is inside the TLS');
  assert.ok((statsOf(servers[0] as never).inbound?.protocols.h2 ?? 0) >= 1);
  // The callee's metrics count each stream under its caller.
  const counted = await Promise.all(
    servers.map((p) => metric(p, 'outrigger_requests_total', { direction: 'ingress', caller: 'shop/web' })),
  );
  assert.equal(
    counted.reduce((x, y) => x + y, 0),
    10,
  );
  assert.equal(statsOf(client).egress.plaintext, 0);
});

test('allow-from applies to every meshed h2 stream: PERMISSION_DENIED with the code, the app never sees it', async (t) => {
  let rules: AllowRule[] = [{ namespace: 'shop', serviceAccount: 'checkout' }];
  const { apps, session } = await grpcMesh(t, () => rules);
  const denied = await h2Request(session, grpcHeaders('api.shop'), 'x');
  assert.equal(denied.headers['grpc-status'], '7', JSON.stringify(denied.headers));
  assert.equal(denied.headers['x-outrigger-error'], 'mesh_caller_denied');
  assert.match(String(denied.headers['grpc-message']), /spiffe:\/\/cluster\.local\/ns\/shop\/sa\/web/);
  assert.equal((apps[0]?.streams.length ?? 0) + (apps[1]?.streams.length ?? 0), 0);
  // The same connection: the next stream is judged again.
  rules = [{ namespace: 'shop', serviceAccount: 'web' }];
  const allowed = await h2Request(session, grpcHeaders('api.shop'), 'x');
  assert.equal(allowed.trailers['grpc-status'], '0');
});

test('an h2c endpoint without a mesh listener gets plaintext h2c, remembered as not meshed', async (t) => {
  const ca = await testCa();
  const app = await startH2Backend(echo, {}, '127.0.0.4');
  t.after(() => app.close());
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: await closedPort('127.0.0.4'),
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
  });
  client.resolver.set(service('shop', 'plain', { eps: { http: [ep('127.0.0.4', app.port)] } }));
  const session = await h2Client(client.egress);
  t.after(() => session.close());
  const r = await h2Request(session, grpcHeaders('plain.shop'), 'x');
  assert.equal(r.trailers['grpc-status'], '0', JSON.stringify(r));
  assert.equal(app.streams[0]?.['x-forwarded-client-cert'], undefined);
  assert.deepEqual(
    { notMeshed: statsOf(client).egress.notMeshed, mtls: statsOf(client).egress.mtls },
    { notMeshed: 1, mtls: 0 },
  );
});
