import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { MeshDialer } from '../../../src/mesh/mesh-dialer.ts';
import { MeshListener } from '../../../src/mesh/mesh-listener.ts';
import { MESH_ALPN, MeshTls } from '../../../src/mesh/mesh-tls.ts';
import { MESH_PEER_NAMESPACE } from '../../../src/proxy/dial.ts';
import { defaultLimits } from '../../../src/proxy/server.ts';
import { systemClock } from '../../../src/shared/clock.ts';
import { credentialsFor, fixedSources, testCa } from '../../harness/mesh.ts';
import { ep, service } from '../routing/fixtures.ts';
import { send } from '../proxy/harness.ts';
import { API, app, log, meshedSidecar, TD, WEB } from './mesh-harness.ts';

/** api's identity in another namespace than API's (shop). */
const PROD_API = 'spiffe://cluster.local/ns/prod/sa/api';

test('a client refuses a meshed server of another namespace than the Service, and tries the next endpoint', async (t) => {
  const ca = await testCa();
  // Two server pods with one mesh port: 127.0.0.2 holds shop's api identity, 127.0.0.4 prod's.
  let meshPort = 0;
  const [shopApp, prodApp] = [await app('127.0.0.2', t), await app('127.0.0.4', t)];
  for (const [host, id, port] of [
    ['127.0.0.2', API, shopApp],
    ['127.0.0.4', PROD_API, prodApp],
  ] as const)
    // The first binds a port of its own choosing, the second the same on its address.
    meshPort = (
      await meshedSidecar(t, {
        host,
        listenPort: meshPort,
        tls: new MeshTls(fixedSources(await credentialsFor(ca, id), ca.trustBundle), TD),
        appPorts: [port],
      })
    ).meshPort;
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: meshPort,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
  });
  // prod/api lists both pods: the one of shop is refused, each request goes to prod's.
  client.resolver.set(
    service('prod', 'api', { eps: { http: [ep('127.0.0.2', shopApp), ep('127.0.0.4', prodApp)] } }),
  );
  for (let i = 0; i < 6; i++) {
    const r = await send(client.egress, { headers: { host: 'api.prod' } });
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(JSON.parse(r.body), { xfcc: `By=${PROD_API};URI=${WEB}` });
  }
  const egress = () =>
    (client.wiring.stats() as { egress: { wrongNamespace: number; plaintext: number } }).egress;
  assert.ok(egress().wrongNamespace >= 1, 'the refusal is counted on /debug/mesh');

  // A Service whose only endpoint is of another namespace: a failed connect, never plaintext.
  client.resolver.set(service('prod', 'impostor', { eps: { http: [ep('127.0.0.2', shopApp)] } }));
  const refused = await send(client.egress, { headers: { host: 'impostor.prod' } });
  assert.equal(refused.status, 502, refused.body);
  assert.equal(refused.headers['x-outrigger-error'], 'upstream_failed');
  assert.match(refused.body, new RegExp(MESH_PEER_NAMESPACE));
  assert.equal(egress().plaintext, 0);

  // The same pod is accepted for a Service of its own namespace (its own pool, its own check).
  client.resolver.set(service('shop', 'api', { eps: { http: [ep('127.0.0.2', shopApp)] } }));
  const own = await send(client.egress, { headers: { host: 'api.shop' } });
  assert.equal(own.status, 200, own.body);
  assert.deepEqual(JSON.parse(own.body), { xfcc: `By=${API};URI=${WEB}` });
});

test('the namespace is checked on every protocol, and a TLS session is resumed only for the namespace it was checked for', async (t) => {
  const ca = await testCa();
  const listener = new MeshListener({
    host: '127.0.0.2',
    port: 0,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, API), ca.trustBundle), TD),
    allowFrom: () => [],
    handlers: { onRequest: (_q, r) => r.end('ok'), onTcp: (s) => s.once('data', () => s.end('pong')) },
    ownPorts: new Set(),
    limits: defaultLimits,
    clock: systemClock,
    log,
  });
  await listener.start();
  t.after(() => listener.close());
  const dialer = new MeshDialer({
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
    meshPort: listener.port(),
    clock: systemClock,
    log,
    connectTimeoutMs: 2_000,
  });
  const open = (protocol: (typeof MESH_ALPN)[keyof typeof MESH_ALPN], namespace?: string) =>
    new Promise<Socket>((resolve, reject) =>
      dialer.for(protocol)(
        '127.0.0.2',
        5000,
        (err, s) => (s && !err ? resolve(s) : reject(err ?? new Error('no socket'))),
        namespace,
      ),
    );
  // A TCP exchange, so that the client receives the session ticket before the close.
  const exchange = async (namespace: string): Promise<void> => {
    const s = await open(MESH_ALPN.tcp, namespace);
    s.end('ping');
    await new Promise((r) => s.on('close', r).resume());
  };
  await exchange('shop');
  await exchange('shop');
  assert.equal(dialer.stats.resumed, 1, 'the next connection resumes');
  await assert.rejects(open(MESH_ALPN.tcp, 'prod'), (e: NodeJS.ErrnoException) => {
    assert.equal(e.code, MESH_PEER_NAMESPACE);
    assert.match(e.message, /is spiffe:\/\/cluster\.local\/ns\/shop\/sa\/api, not of namespace prod/);
    return true;
  });
  assert.equal(dialer.stats.resumed, 1, 'a ticket checked for shop is not offered for prod');
  await assert.rejects(open(MESH_ALPN.http1, 'prod'), { code: MESH_PEER_NAMESPACE });
  (await open(MESH_ALPN.http1)).destroy(); // a passthrough destination: the trust domain only
  assert.deepEqual(
    { wrongNamespace: dialer.stats.wrongNamespace, plaintext: dialer.stats.plaintext },
    { wrongNamespace: 2, plaintext: 0 },
  );
});
