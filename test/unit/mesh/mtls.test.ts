import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import type { AllowRule } from '../../../src/config/parse.ts';
import { MeshTls } from '../../../src/mesh/mesh-tls.ts';
import { meshWiring } from '../../../src/mesh/wiring.ts';
import { systemClock } from '../../../src/shared/clock.ts';
import { ep, service } from '../routing/fixtures.ts';
import { credentialsFor, fixedSources, testCa } from '../../harness/mesh.ts';
import { send, startProxy } from '../proxy/harness.ts';
import { API, app, listen, log, meshedSidecar, recordingRelay, TD, WEB } from './mesh-harness.ts';

test('two meshed sidecars talk mutual TLS; the app sees the caller; plaintext to the rest; allow-from', async (t) => {
  const ca = await testCa();
  const [webCreds, apiCreds] = [await credentialsFor(ca, WEB), await credentialsFor(ca, API)];
  // The server pod on 127.0.0.2, an unmeshed pod on 127.0.0.3, the client on 127.0.0.1.
  const apiPort = await app('127.0.0.2', t);
  const plainPort = await app('127.0.0.3', t);
  let rules: AllowRule[] = [];
  const server = await meshedSidecar(t, {
    host: '127.0.0.2',
    tls: new MeshTls(fixedSources(apiCreds, ca.trustBundle), TD),
    allowFrom: () => rules,
    appPorts: [apiPort],
  });
  const wire = await recordingRelay('127.0.0.2', server.meshPort, t);
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: wire.port,
    tls: new MeshTls(fixedSources(webCreds, ca.trustBundle), TD),
  });
  client.resolver.set(service('shop', 'api', { eps: { http: [ep('127.0.0.2', apiPort)] } }));
  client.resolver.set(service('shop', 'plain', { eps: { http: [ep('127.0.0.3', plainPort)] } }));

  // 1. Meshed: the app gets the verified caller, not what the caller claimed.
  const marker = 'marker-7f3a9c';
  for (let i = 0; i < 5; i++) {
    const r = await send(client.egress, {
      path: `/${marker}`,
      headers: {
        host: 'api.shop',
        'x-forwarded-client-cert': 'URI=spiffe://cluster.local/ns/kube-system/sa/admin',
      },
    });
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(JSON.parse(r.body), { xfcc: `By=${API};URI=${WEB}` });
  }
  const dials = client.wiring.stats() as { egress: { mtls: number; plaintext: number; notMeshed: number } };
  assert.ok(
    dials.egress.mtls >= 1 && dials.egress.mtls < 5,
    `pooled: ${dials.egress.mtls} handshakes for 5 requests`,
  );
  const bytes = wire();
  assert.equal(bytes[0], 0x16, 'the hop starts with a TLS handshake record');
  assert.equal(bytes.includes(marker), false, 'the request path never crosses the wire in clear');
  assert.equal(bytes.includes('x-forwarded-client-cert'), false);

  // A meshed caller names a port, but only the app's ports are reachable through the mesh listener.
  const hidden = await app('127.0.0.2', t);
  client.resolver.set(service('shop', 'hidden', { eps: { http: [ep('127.0.0.2', hidden)] } }));
  const misdirected = await send(client.egress, { headers: { host: 'hidden.shop' } });
  assert.equal(misdirected.headers['x-outrigger-error'], 'misdirected', misdirected.body);

  // 2. Not meshed: the mesh port refuses, so plaintext, remembered for the next connections.
  for (let i = 0; i < 2; i++) {
    const r = await send(client.egress, { headers: { host: 'plain.shop' } });
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.body), { xfcc: null });
  }
  assert.equal(dials.egress.notMeshed, 1);
  assert.ok(dials.egress.plaintext >= 1);

  // 3. allow-from without the caller: 403 with the code.
  rules = [{ namespace: 'shop', serviceAccount: 'checkout' }];
  const denied = await send(client.egress, { headers: { host: 'api.shop' } });
  assert.equal(denied.status, 403);
  assert.equal(denied.headers['x-outrigger-error'], 'mesh_caller_denied');
  rules = [{ namespace: 'shop', serviceAccount: '*' }];
  assert.equal((await send(client.egress, { headers: { host: 'api.shop' } })).status, 200);
  assert.ok(((server.wiring.stats() as { inbound: { denied: number } }).inbound.denied ?? 0) >= 1);
});

test('the mesh listener accepts neither plaintext nor a certificate from another CA', async (t) => {
  const ca = await testCa();
  const other = await testCa(Date.now(), 'another ca');
  const apiPort = await app('127.0.0.2', t);
  const server = await meshedSidecar(t, {
    host: '127.0.0.2',
    tls: new MeshTls(fixedSources(await credentialsFor(ca, API), ca.trustBundle), TD),
  });
  // Plaintext HTTP to the mesh port: no HTTP answer, the connection is closed.
  const reply = await new Promise<string>((resolve) => {
    const s = connect(server.meshPort, '127.0.0.2');
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('error', () => resolve(got));
    s.on('close', () => resolve(got));
    s.write(`GET / HTTP/1.1\r\nhost: x\r\n\r\n`);
  });
  assert.doesNotMatch(reply, /HTTP\/1\.1/);

  // A client whose certificate another CA signed: the handshake fails, the request never reaches the app.
  const intruder = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: server.meshPort,
    // It trusts our CA (so it would accept the server) but presents another CA's certificate.
    tls: new MeshTls(fixedSources(await credentialsFor(other, WEB), ca.trustBundle), TD),
  });
  intruder.resolver.set(service('shop', 'api', { eps: { http: [ep('127.0.0.2', apiPort)] } }));
  const r = await send(intruder.egress, { headers: { host: 'api.shop' } });
  assert.equal(r.status, 502);
  const inbound = (server.wiring.stats() as { inbound: { accepted: number } }).inbound;
  assert.equal(inbound.accepted, 0);
});

test('the ingress never passes on an x-forwarded-client-cert a plaintext caller sent', async (t) => {
  const apiPort = await app('127.0.0.1', t);
  const p = await startProxy({ appPorts: [apiPort] });
  t.after(() => p.close());
  const r = await send(p.ingress, { headers: { host: 'x', 'x-forwarded-client-cert': `URI=${WEB}` } });
  assert.equal(r.status, 200);
  assert.deepEqual(JSON.parse(r.body), { xfcc: null });
});

test('plaintext callers: strict refuses other pods, allow-from needs an identity, the pod itself always passes', () => {
  const ca = { trustBundle: '' };
  const wiring = (mode: 'permissive' | 'strict', rules: AllowRule[] = []) =>
    meshWiring({
      tls: new MeshTls(fixedSources(undefined, ca.trustBundle), TD),
      meshPort: 1,
      appHost: '127.0.0.1',
      allowFrom: () => rules,
      mode,
      connectTimeoutMs: 1_000,
      clock: systemClock,
      log,
    });
  const from = (remoteAddress: string) => ({ remoteAddress }) as Socket;
  assert.equal(wiring('permissive').refusePlaintext(from('10.1.2.3')), undefined);
  assert.match(wiring('strict').refusePlaintext(from('10.1.2.3')) ?? '', /mutual TLS only/);
  assert.match(wiring('strict').refusePlaintext(from('::ffff:10.1.2.3')) ?? '', /mutual TLS only/);
  assert.match(
    wiring('permissive', [{ namespace: 'shop', serviceAccount: '*' }]).refusePlaintext(from('10.1.2.3')) ??
      '',
    /meshed callers only/,
  );
  for (const own of ['127.0.0.1', '::1', '::ffff:127.0.0.1'])
    assert.equal(wiring('strict').refusePlaintext(from(own)), undefined, own);
});

test('certificate rotation on both sides under steady traffic fails no request', async (t) => {
  const ca = await testCa();
  let webCreds = await credentialsFor(ca, WEB);
  let apiCreds = await credentialsFor(ca, API);
  const listeners: (() => void)[] = [];
  const rotating = (get: () => typeof webCreds) => ({
    identity: { current: get, onChange: (fn: () => void) => void listeners.push(fn) },
    bundle: { pem: () => ca.trustBundle, onChange: () => {} },
  });
  const apiPort = await app('127.0.0.2', t);
  const server = await meshedSidecar(t, {
    host: '127.0.0.2',
    tls: new MeshTls(
      rotating(() => apiCreds),
      TD,
    ),
    appPorts: [apiPort],
  });
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: server.meshPort,
    tls: new MeshTls(
      rotating(() => webCreds),
      TD,
    ),
  });
  client.resolver.set(service('shop', 'api', { eps: { http: [ep('127.0.0.2', apiPort)] } }));
  const statuses: number[] = [];
  const firstCert = apiCreds.certificate;
  for (let i = 0; i < 30; i++) {
    if (i === 10 || i === 20) {
      [webCreds, apiCreds] = [await credentialsFor(ca, WEB), await credentialsFor(ca, API)];
      for (const fn of listeners) fn();
    }
    statuses.push((await send(client.egress, { headers: { host: 'api.shop' } })).status);
  }
  assert.deepEqual(new Set(statuses), new Set([200]));
  assert.notEqual(apiCreds.certificate, firstCert);
  const inbound = (server.wiring.stats() as { inbound: { accepted: number } }).inbound;
  assert.ok(inbound.accepted >= 1);
});

test('a strict pod is unready until it holds a certificate; a permissive one does not wait', async (t) => {
  const ca = await testCa();
  const held: { creds?: Awaited<ReturnType<typeof credentialsFor>> } = {};
  const sources = {
    identity: { current: () => held.creds, onChange: () => {} },
    bundle: { pem: () => ca.trustBundle, onChange: () => {} },
  };
  const strict = await meshedSidecar(t, {
    host: '127.0.0.1',
    tls: new MeshTls(sources, TD),
    mode: 'strict',
  });
  const permissive = await meshedSidecar(t, {
    host: '127.0.0.1',
    tls: new MeshTls(sources, TD),
  });
  const readyz = async (p: typeof strict) => (await send(p.admin, { path: '/readyz' })).status;
  assert.equal(await readyz(strict), 503);
  assert.equal(await readyz(permissive), 200);
  held.creds = await credentialsFor(ca, API);
  assert.equal(await readyz(strict), 200);
});

test('a mesh port that never finishes the handshake fails the connect; it is no reason to go plaintext', async (t) => {
  const ca = await testCa();
  // Accepts TCP on the "mesh port" of 127.0.0.2 and then says nothing, like a blackholed handshake.
  const silent = createServer(() => {});
  const sockets = new Set<Socket>();
  silent.on('connection', (s) => sockets.add(s));
  const meshPort = await listen(silent, '127.0.0.2');
  t.after(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });
  const apiPort = await app('127.0.0.2', t);
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: meshPort,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
  });
  client.resolver.set(service('shop', 'api', { eps: { http: [ep('127.0.0.2', apiPort)] } }));
  const r = await send(client.egress, { headers: { host: 'api.shop' } });
  // A connect failure (502, ETIMEDOUT), not a request hanging until the response timeout (504).
  assert.equal(r.status, 502, r.body);
  assert.match(r.body, /ETIMEDOUT/);
  const dials = (client.wiring.stats() as { egress: { plaintext: number; notMeshed: number } }).egress;
  assert.deepEqual(
    { plaintext: dials.plaintext, notMeshed: dials.notMeshed },
    { plaintext: 0, notMeshed: 0 },
  );
});
