import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { MeshTls } from '../../../src/mesh/mesh-tls.ts';
import { credentialsFor, fixedSources, testCa } from '../../harness/mesh.ts';
import { send } from '../proxy/harness.ts';
import { ep, service } from '../routing/fixtures.ts';
import { API, app, meshedSidecar, TD, WEB } from './mesh-harness.ts';

/** A TLS handshake record announcing a 512-byte ClientHello, and its first bytes: never finished. */
const partialClientHello = (random = 32): Buffer =>
  Buffer.concat([
    Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]),
    randomBytes(random),
  ]);

interface Opened {
  socket: Socket;
  closed: Promise<void>;
}

function open(port: number, host: string): Opened {
  const socket = connect(port, host);
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, closed };
}

/**
 * A ClientHello sent one byte at a time for as long as the connection is open, at most 200 bytes
 * (20 s at 100 ms, past the test's deadline): still short of the 512 the record announced.
 */
function trickle(o: Opened, everyMs: number): void {
  const bytes = partialClientHello(200 - 11);
  let i = 0;
  const timer = setInterval(() => {
    if (o.socket.destroyed || i >= bytes.length) return clearInterval(timer);
    o.socket.write(bytes.subarray(i, ++i));
  }, everyMs);
  void o.closed.then(() => clearInterval(timer));
}

/** How many of the connections the server closed before the deadline. */
async function closedWithin(conns: Opened[], ms: number): Promise<number> {
  let closed = 0;
  for (const c of conns) void c.closed.then(() => closed++);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  await Promise.race([Promise.all(conns.map((c) => c.closed)), deadline]);
  clearTimeout(timer);
  return closed;
}

test('the mesh port closes connections that never finish the TLS handshake; mTLS still works', async (t) => {
  const ca = await testCa();
  const appPort = await app('127.0.0.2', t);
  const server = await meshedSidecar(t, {
    host: '127.0.0.2',
    tls: new MeshTls(fixedSources(await credentialsFor(ca, API), ca.trustBundle), TD),
    appPorts: [appPort],
    limits: { headersTimeoutMs: 300 },
  });
  const meshPort = server.dp.ports().mesh;
  assert.ok(meshPort);

  const silent = Array.from({ length: 10 }, () => open(meshPort, '127.0.0.2'));
  const partial = Array.from({ length: 5 }, () => open(meshPort, '127.0.0.2'));
  for (const c of partial) c.socket.write(partialClientHello());
  // A byte every 100 ms: activity must not keep a handshake alive past its deadline.
  const trickling = Array.from({ length: 5 }, () => open(meshPort, '127.0.0.2'));
  for (const c of trickling) trickle(c, 100);
  const garbage = open(meshPort, '127.0.0.2');
  garbage.socket.write(Buffer.concat([Buffer.from('\x00\xffnot TLS at all\r\n'), randomBytes(64)]));

  const all = [...silent, ...partial, ...trickling, garbage];
  const closed = await closedWithin(all, 10_000);
  // Before the sidecar closes: it waits for its open connections.
  for (const c of all) c.socket.destroy();
  assert.equal(closed, all.length, `${closed} of ${all.length} unfinished handshakes closed by the server`);
  const inbound = (server.wiring.stats() as { inbound: { handshakeFailures: number; accepted: number } })
    .inbound;
  assert.ok(
    inbound.handshakeFailures >= all.length,
    `${inbound.handshakeFailures} handshake failures counted`,
  );
  assert.equal(inbound.accepted, 0);

  // A real meshed caller is unaffected: its handshake finishes well within the deadline.
  const client = await meshedSidecar(t, {
    host: '127.0.0.1',
    peerPort: meshPort,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD),
  });
  client.resolver.set(service('shop', 'api', { eps: { http: [ep('127.0.0.2', appPort)] } }));
  const r = await send(client.egress, { headers: { host: 'api.shop' } });
  assert.equal(r.status, 200, r.body);
  assert.deepEqual(JSON.parse(r.body), { xfcc: `By=${API};URI=${WEB}` });
});
