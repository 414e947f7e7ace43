import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import type { AllowRule } from '../../../src/config/parse.ts';
import { MeshTls } from '../../../src/mesh/mesh-tls.ts';
import { credentialsFor, fixedSources, testCa } from '../../harness/mesh.ts';
import { exchange, metric } from '../proxy/harness.ts';
import { ep, service } from '../routing/fixtures.ts';
import { API, listen, meshedSidecar, recordingRelay, TD, WEB } from './mesh-harness.ts';

/** A TCP app that answers each connection's first line with "PONG <line>". */
async function pongApp(host: string, t: { after(fn: () => unknown): void }): Promise<number> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('error', () => s.destroy());
    s.once('data', (d: Buffer) => s.end(`PONG ${d.toString('latin1').trim()}\n`));
  });
  t.after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return listen(server, host);
}

/** CONNECT through the egress listener, one line through the tunnel; everything read until close. */
const tunnelLine = (egress: number, target: string, line: string): Promise<string> =>
  exchange(egress, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`, `${line}\n`);

const statsOf = (p: { wiring: { stats(): unknown } }) =>
  p.wiring.stats() as {
    egress: { mtls: number; resumed: number; plaintext: number; notMeshed: number };
    inbound?: { accepted: number; resumed: number; denied: number; protocols: Record<string, number> };
  };

async function tcpMesh(t: { after(fn: () => unknown): void }, rules: () => AllowRule[] = () => []) {
  const ca = await testCa();
  const appPort = await pongApp('127.0.0.2', t);
  const listeners: (() => void)[] = [];
  let webCreds = await credentialsFor(ca, WEB);
  const server = await meshedSidecar(t, {
    host: '127.0.0.2',
    tls: new MeshTls(fixedSources(await credentialsFor(ca, API), ca.trustBundle), TD),
    appPorts: [appPort],
    allowFrom: rules,
  });
  const wire = await recordingRelay('127.0.0.2', server.meshPort, t);
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: wire.port,
    tls: new MeshTls(
      {
        identity: { current: () => webCreds, onChange: (fn) => void listeners.push(fn) },
        bundle: { pem: () => ca.trustBundle, onChange: () => {} },
      },
      TD,
    ),
  });
  client.resolver.set(
    service('shop', 'db', {
      ports: [{ name: 'tcp', port: appPort, protocol: 'TCP' }],
      eps: { tcp: [ep('127.0.0.2', appPort)] },
    }),
  );
  const rotate = async (): Promise<void> => {
    webCreds = await credentialsFor(ca, WEB);
    for (const fn of listeners) fn();
  };
  return { server, client, wire, target: `db.shop:${appPort}`, rotate };
}

test('TCP between meshed sidecars goes over mTLS (ALPN outrigger-tcp); TLS sessions are resumed, and forgotten on rotation', async (t) => {
  const { server, client, wire, target, rotate } = await tcpMesh(t);
  const marker = 'marker-tcp-91d2';
  for (let i = 0; i < 3; i++) {
    const out = await tunnelLine(client.egress, target, `${marker}-${i}`);
    assert.match(
      out,
      new RegExp(`^HTTP/1\\.1 200 Connection Established\\r\\n\\r\\nPONG ${marker}-${i}\\n$`),
    );
  }
  const bytes = wire();
  assert.equal(bytes[0], 0x16, 'the stream starts with a TLS handshake record');
  assert.equal(bytes.includes(marker), false, 'no byte of the stream crosses the wire in clear');
  const inbound = statsOf(server).inbound;
  assert.equal(inbound?.protocols['outrigger-tcp'], 3);
  const counted = await metric(server, 'outrigger_requests_total', {
    direction: 'ingress',
    caller: 'shop/web',
  });
  assert.equal(counted, 3, 'each stream is counted under its caller');
  // Each tunnel is a new connection: the first makes a session, the next ones resume it.
  assert.deepEqual(
    { mtls: statsOf(client).egress.mtls, resumed: statsOf(client).egress.resumed },
    { mtls: 3, resumed: 2 },
  );
  assert.equal(inbound?.resumed, 2);

  // A new client certificate: the old session is not offered (the server would see the old one).
  await rotate();
  await tunnelLine(client.egress, target, 'after-rotation');
  assert.deepEqual(
    { mtls: statsOf(client).egress.mtls, resumed: statsOf(client).egress.resumed },
    { mtls: 4, resumed: 2 },
  );
  await tunnelLine(client.egress, target, 'resumed-again');
  assert.equal(statsOf(client).egress.resumed, 3);
});

test('allow-from applies to a meshed TCP stream at connection time: closed before a byte reaches the app', async (t) => {
  const { server, client, target } = await tcpMesh(t, () => [
    { namespace: 'shop', serviceAccount: 'checkout' },
  ]);
  const out = await tunnelLine(client.egress, target, 'hello');
  assert.doesNotMatch(out, /PONG/);
  assert.equal(statsOf(server).inbound?.denied, 1);
});

test('TCP to a destination that is no Service endpoint stays plaintext, without trying the mesh port', async (t) => {
  const { client, wire, target } = await tcpMesh(t);
  const direct = target.replace('db.shop', '127.0.0.2');
  const out = await tunnelLine(client.egress, direct, 'passthrough');
  assert.match(out, /PONG passthrough\n$/);
  assert.equal(wire().length, 0, 'nothing went to the mesh port');
  assert.deepEqual(statsOf(client).egress, {
    mtls: 0,
    resumed: 0,
    plaintext: 0,
    notMeshed: 0,
    failed: 0,
    wrongNamespace: 0,
  });
});
