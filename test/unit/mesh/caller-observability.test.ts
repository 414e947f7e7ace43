import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { callerPeers, OTHER_CALLERS } from '../../../src/mesh/caller-peer.ts';
import { MeshTls } from '../../../src/mesh/mesh-tls.ts';
import { meshWiring } from '../../../src/mesh/wiring.ts';
import type { HopObserver, HopStart } from '../../../src/proxy/observer.ts';
import { noopObserver } from '../../../src/proxy/observer.ts';
import { systemClock } from '../../../src/shared/clock.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { ep, service } from '../routing/fixtures.ts';
import { credentialsFor, fixedSources, testCa } from '../../harness/mesh.ts';
import { metric, send, startProxy } from '../proxy/harness.ts';

const log = createLogger({ write: () => {} });
const WEB = 'spiffe://cluster.local/ns/shop/sa/web';
const API = 'spiffe://cluster.local/ns/shop/sa/api';

/** What the ingress observers were told at the start of each hop. */
function recordingObserver(): HopObserver & { starts: HopStart[] } {
  const starts: HopStart[] = [];
  return { starts, startHop: (info) => (starts.push(info), noopObserver.startHop(info)) };
}

test('the callee labels meshed requests with the caller and plaintext ones as unauthenticated', async (t) => {
  const ca = await testCa();
  const app = createHttpServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => app.listen(0, '127.0.0.2', r));
  const appPort = (app.address() as AddressInfo).port;
  t.after(() => {
    app.closeAllConnections();
    app.close();
  });
  const sidecar = async (
    host: string,
    id: string,
    observer: HopObserver,
    o: { appPorts?: number[]; peerPort?: number },
  ) => {
    const wiring = meshWiring({
      tls: new MeshTls(fixedSources(await credentialsFor(ca, id), ca.trustBundle), 'cluster.local'),
      meshPort: o.peerPort ?? 1,
      listenPort: 0,
      host,
      appHost: host,
      allowFrom: () => [],
      mode: 'permissive',
      connectTimeoutMs: 1_000,
      clock: systemClock,
      log,
    });
    const p = await startProxy(
      { appPorts: o.appPorts ?? [] },
      { hosts: { egress: host, ingress: host, admin: host, app: host }, mesh: wiring, observer },
    );
    t.after(() => p.close());
    return p;
  };
  const seen = recordingObserver();
  const server = await sidecar('127.0.0.2', API, seen, { appPorts: [appPort] });
  const client = await sidecar('127.0.0.1', WEB, noopObserver, { peerPort: server.mesh ?? 0 });
  client.resolver.set(service('shop', 'api', { eps: { http: [ep('127.0.0.2', appPort)] } }));

  for (let i = 0; i < 3; i++)
    assert.equal((await send(client.egress, { headers: { host: 'api.shop' } })).status, 200);
  // The same app, reached in plaintext on the server's ingress port.
  assert.equal(
    (await send(server.ingress, { host: '127.0.0.2', headers: { host: 'api.shop' } })).status,
    200,
  );

  const ingress = { direction: 'ingress', status: '200' };
  assert.equal(await metric(server, 'outrigger_requests_total', { ...ingress, caller: 'shop/web' }), 3);
  assert.equal(
    await metric(server, 'outrigger_requests_total', { ...ingress, caller: 'unauthenticated' }),
    1,
  );
  assert.equal(
    await metric(server, 'outrigger_request_duration_seconds_count', {
      direction: 'ingress',
      caller: 'shop/web',
    }),
    3,
  );
  assert.equal(await metric(client, 'outrigger_requests_total', { direction: 'egress', caller: '' }), 3);
  // Tracing is told the full SPIFFE id, on meshed hops only; one shared object per caller.
  const peers = seen.starts.map((s) => s.peer);
  assert.deepEqual(
    peers.slice(0, 3).map((p) => p?.id),
    [WEB, WEB, WEB],
  );
  assert.equal(peers[0], peers[2]);
  assert.equal(peers[3], undefined);
});

test('caller labels are namespace/serviceaccount, resolved once per connection, and capped', () => {
  let reads = 0;
  const socketFor = (id: string): Socket =>
    ({
      getPeerX509Certificate: () => (reads++, { subjectAltName: `URI:${id}` }),
    }) as unknown as Socket;
  const peer = callerPeers('cluster.local', 2);
  const web = socketFor(WEB);
  assert.deepEqual(peer(web), { id: WEB, label: 'shop/web' });
  assert.equal(peer(web), peer(web));
  assert.equal(reads, 1, 'the certificate is read once per connection');
  assert.equal(peer(socketFor(API))?.label, 'shop/api');
  assert.deepEqual(peer(socketFor('spiffe://cluster.local/ns/a/sa/b')), {
    id: 'spiffe://cluster.local/ns/a/sa/b',
    label: OTHER_CALLERS,
  });
  // A caller seen before the cap keeps its own label.
  assert.equal(peer(socketFor(WEB))?.label, 'shop/web');
  // Plain sockets and ids of another trust domain carry no caller.
  assert.equal(peer({} as Socket), undefined);
  assert.equal(peer(socketFor('spiffe://other.org/ns/shop/sa/web')), undefined);
});
