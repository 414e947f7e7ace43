import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import type { Endpoint } from '../../../src/discovery/types.ts';
import { MeshTls } from '../../../src/mesh/mesh-tls.ts';
import { credentialsFor, fixedSources, testCa } from '../../harness/mesh.ts';
import { grpcHeaders, h2Client, h2Request } from '../proxy/h2/h2-harness.ts';
import { exchange, send } from '../proxy/harness.ts';
import { ep, service } from '../routing/fixtures.ts';
import { API, app, listen, meshedSidecar, TD, WEB } from './mesh-harness.ts';

type After = { after(fn: () => unknown): void };

const SECRET = 'Bearer secret-7c41e9';

/** How a Service tells meshed clients which of its endpoints run a mesh listener. */
const MESH_PORT = 'outrigger-mesh';

/**
 * A Service whose pods carry the mesh port: the EndpointSlice controller lists under it exactly
 * the endpoints whose pod has the named container port (`meshed`); `plain` ones lack it.
 */
function declared(name: string, meshPort: number, meshed: Endpoint[], plain: Endpoint[] = []) {
  return service('shop', name, {
    ports: [
      { name: 'http', port: 80, protocol: 'TCP' },
      { name: MESH_PORT, port: 7403, protocol: 'TCP', targetPort: MESH_PORT },
    ],
    eps: {
      http: [...meshed, ...plain],
      [MESH_PORT]: meshed.map((e) => ep(e.address, meshPort)),
    },
  });
}

/** A plaintext app port that records every byte it receives and answers each read with a 200. */
async function recordingApp(host: string, t: After) {
  const got: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => s.destroy());
    s.on('data', (d: Buffer) => {
      got.push(d);
      s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    });
  });
  t.after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const port = await listen(server, host);
  return { port, received: () => Buffer.concat(got).toString('latin1') };
}

/** A mesh port that accepts each connection and answers it with a TCP reset. */
async function resettingMeshPort(host: string, t: After): Promise<number> {
  const server = createServer((s) => s.resetAndDestroy());
  t.after(() => server.close());
  return listen(server, host);
}

const statsOf = (p: { wiring: { stats(): unknown } }) =>
  (p.wiring.stats() as { egress: { mtls: number; plaintext: number; notMeshed: number; failed: number } })
    .egress;

test('a meshed endpoint whose mesh port resets or refuses gets no plaintext: the call fails, the app port receives nothing', async (t) => {
  const ca = await testCa();
  // 127.0.0.3's mesh port resets every connection; nothing listens on 127.0.0.4's (refused).
  const meshPort = await resettingMeshPort('127.0.0.3', t);
  const reset = await recordingApp('127.0.0.3', t);
  const refused = await recordingApp('127.0.0.4', t);
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: meshPort,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
  });
  client.resolver.set(declared('reset', meshPort, [ep('127.0.0.3', reset.port)]));
  client.resolver.set(declared('refused', meshPort, [ep('127.0.0.4', refused.port)]));

  const replies = [];
  for (const host of ['reset.shop', 'refused.shop'])
    for (let i = 0; i < 3; i++)
      replies.push(await send(client.egress, { headers: { host, authorization: SECRET } }));
  assert.equal(refused.received(), '', 'nothing reached the app port behind the refusing mesh port');
  for (const r of replies) {
    assert.ok(r.status === 502 || r.status === 503, `${r.status} ${r.body}`);
    assert.equal(r.headers['x-outrigger-error'], 'upstream_failed', r.body);
  }
  // The same for a TCP stream (a CONNECT tunnel) and an h2 (gRPC) call.
  const tunnel = await exchange(
    client.egress,
    'CONNECT refused.shop:80 HTTP/1.1\r\nHost: refused.shop:80\r\n\r\n',
    `GET / HTTP/1.1\r\nauthorization: ${SECRET}\r\n\r\n`,
  );
  assert.match(tunnel, /^HTTP\/1\.1 502 /);
  const session = await h2Client(client.egress);
  t.after(() => session.close());
  const call = await h2Request(
    session,
    grpcHeaders('refused.shop', undefined, { authorization: SECRET }),
    'x',
  );
  assert.equal(call.trailers['grpc-status'] ?? call.headers['grpc-status'], '14', JSON.stringify(call));

  assert.equal(reset.received(), '', 'nothing reached the app port behind the resetting mesh port');
  assert.equal(refused.received(), '', 'nothing reached the app port behind the refusing mesh port');
  const egress = statsOf(client);
  assert.deepEqual(
    { plaintext: egress.plaintext, notMeshed: egress.notMeshed },
    { plaintext: 0, notMeshed: 0 },
  );
  assert.ok(egress.failed >= 8, `${egress.failed} failed mesh connects counted`);
});

test('a failed mesh port is a connect failure: the request goes to another meshed endpoint', async (t) => {
  const ca = await testCa();
  const apiPort = await app('127.0.0.2', t);
  const server = await meshedSidecar(t, {
    host: '127.0.0.2',
    tls: new MeshTls(fixedSources(await credentialsFor(ca, API), ca.trustBundle), TD),
    appPorts: [apiPort],
  });
  const meshPort = server.dp.ports().mesh;
  assert.ok(meshPort);
  // The second endpoint's sidecar is down: its mesh port refuses, its app port still listens.
  const down = await recordingApp('127.0.0.4', t);
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: meshPort,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
  });
  client.resolver.set(declared('api', meshPort, [ep('127.0.0.2', apiPort), ep('127.0.0.4', down.port)]));
  for (let i = 0; i < 4; i++) {
    const r = await send(client.egress, { headers: { host: 'api.shop', authorization: SECRET } });
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(JSON.parse(r.body), { xfcc: `By=${API};URI=${WEB}` });
  }
  assert.equal(down.received(), '');
  assert.ok(statsOf(client).failed >= 1, 'the refused mesh port was tried and counted');
  assert.equal(statsOf(client).plaintext, 0);
});

test('an endpoint its Service lists without the mesh port is dialled in plaintext, without trying the mesh port', async (t) => {
  const ca = await testCa();
  // A rollout: one pod has the sidecar (its mesh port resets here), one does not yet.
  const meshPort = await resettingMeshPort('127.0.0.3', t);
  const meshed = await recordingApp('127.0.0.3', t);
  const legacy = await recordingApp('127.0.0.5', t);
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: meshPort,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
  });
  client.resolver.set(
    declared('api', meshPort, [ep('127.0.0.3', meshed.port)], [ep('127.0.0.5', legacy.port)]),
  );
  for (let i = 0; i < 3; i++) {
    const r = await send(client.egress, { headers: { host: 'api.shop' } });
    assert.equal(r.status, 200, r.body);
  }
  assert.match(legacy.received(), /^GET \/ HTTP\/1\.1\r\n/);
  assert.equal(meshed.received(), '');
  const egress = statsOf(client);
  // 127.0.0.5's mesh port was never tried: a refusal there would have counted it as not meshed.
  assert.deepEqual({ mtls: egress.mtls, notMeshed: egress.notMeshed }, { mtls: 0, notMeshed: 0 });
  assert.ok(egress.plaintext >= 1 && egress.failed >= 1, JSON.stringify(egress));
});

test('a sidecar without a certificate yet does not dial a meshed endpoint in plaintext', async (t) => {
  const ca = await testCa();
  const meshPort = await resettingMeshPort('127.0.0.3', t);
  const app = await recordingApp('127.0.0.3', t);
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: meshPort,
    tls: new MeshTls(fixedSources(undefined, ca.trustBundle), TD),
  });
  client.resolver.set(declared('api', meshPort, [ep('127.0.0.3', app.port)]));
  const r = await send(client.egress, { headers: { host: 'api.shop', authorization: SECRET } });
  assert.equal(app.received(), '', 'nothing reached the app port');
  assert.equal(r.status, 502, r.body);
  assert.match(r.body, /ERR_MESH_NO_CERTIFICATE/);
  assert.equal(statsOf(client).plaintext, 0);
});

test('a connection opened in plaintext is not reused once the Service lists its endpoint as meshed', async (t) => {
  const ca = await testCa();
  const meshPort = await resettingMeshPort('127.0.0.3', t);
  const app = await recordingApp('127.0.0.4', t);
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: meshPort,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
  });
  // Not declared yet: the refused mesh port means plaintext, on a kept-alive connection.
  client.resolver.set(service('shop', 'api', { eps: { http: [ep('127.0.0.4', app.port)] } }));
  const before = await send(client.egress, { headers: { host: 'api.shop' } });
  assert.equal(before.status, 200, before.body);
  const first = app.received();
  assert.match(first, /^GET \/ HTTP\/1\.1\r\n/);
  client.resolver.set(declared('api', meshPort, [ep('127.0.0.4', app.port)]));
  const after = await send(client.egress, { headers: { host: 'api.shop', authorization: SECRET } });
  assert.equal(app.received(), first, 'the request did not go down the plaintext connection');
  assert.equal(after.status, 502, after.body);
});

test('HTTP to a destination that is no Service endpoint goes in plaintext to that address, without trying the mesh port', async (t) => {
  // A ClusterIP discovery knows nothing about (a sidecar restarted during an API outage before it
  // stored a snapshot) is such a destination: through it, the mesh port would reach a pod's mesh
  // listener that is told the Service port, not the app's.
  const ca = await testCa();
  const target = await recordingApp('127.0.0.2', t);
  const meshPort = await resettingMeshPort('127.0.0.2', t);
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: meshPort,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
  });
  for (let i = 0; i < 2; i++) {
    const r = await send(client.egress, { headers: { host: `127.0.0.2:${target.port}` } });
    assert.equal(r.status, 200, r.body);
  }
  assert.match(target.received(), /^GET \/ HTTP\/1\.1\r\n/);
  const egress = statsOf(client);
  assert.deepEqual(
    { mtls: egress.mtls, notMeshed: egress.notMeshed, failed: egress.failed },
    { mtls: 0, notMeshed: 0, failed: 0 },
    'the mesh port was never tried',
  );
  assert.ok(egress.plaintext >= 1, JSON.stringify(egress));
});
