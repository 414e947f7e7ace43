import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { MeshDialer } from '../../../src/mesh/mesh-dialer.ts';
import { MeshListener, type MeshHandlers } from '../../../src/mesh/mesh-listener.ts';
import { MESH_ALPN, MeshTls, peerCertificateCurrent } from '../../../src/mesh/mesh-tls.ts';
import { TlsSessions } from '../../../src/mesh/tls-sessions.ts';
import { defaultLimits } from '../../../src/proxy/server.ts';
import { systemClock } from '../../../src/shared/clock.ts';
import { credentialsFor, testCa } from '../../harness/mesh.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { API, log, TD, WEB } from './mesh-harness.ts';

test('the session cache keeps the latest ticket per key and forgets the oldest beyond its bound', () => {
  const s = new TlsSessions(2);
  s.set('a', Buffer.from('1'));
  s.set('b', Buffer.from('2'));
  s.set('a', Buffer.from('3'));
  s.set('c', Buffer.from('4'));
  assert.equal(s.get('b'), undefined, 'b was the least recently stored');
  assert.equal(s.get('a')?.toString(), '3');
  assert.equal(s.size, 2);
  s.clear();
  assert.equal(s.size, 0);
});

test('a peer certificate past its notAfter is not current (a resumed session keeps the old certificate)', () => {
  const socket = (validTo: string) =>
    ({
      getPeerX509Certificate: () => ({ validTo, subjectAltName: `URI:${WEB}` }),
    }) as unknown as TLSSocket;
  const now = Date.parse('2026-06-01T00:00:00Z');
  assert.equal(peerCertificateCurrent(socket('Jun  1 00:00:01 2026 GMT'), now), true);
  assert.equal(peerCertificateCurrent(socket('May 31 23:59:59 2026 GMT'), now), false);
});

/** A mesh listener whose identity can rotate, and a dialer with its own fixed identity. */
async function pair(t: { after(fn: () => unknown): void }, handlers: Partial<MeshHandlers>) {
  const ca = await testCa();
  let serverCreds = await credentialsFor(ca, API);
  const changed: (() => void)[] = [];
  const serverTls = new MeshTls(
    {
      identity: { current: () => serverCreds, onChange: (fn) => void changed.push(fn) },
      bundle: { pem: () => ca.trustBundle, onChange: () => {} },
    },
    TD,
  );
  const clock = new FakeClock(Date.now());
  const listener = new MeshListener({
    host: '127.0.0.2',
    port: 0,
    tls: serverTls,
    allowFrom: () => [],
    handlers: { onRequest: (_q, r) => r.end('http/1.1'), ...handlers },
    ownPorts: new Set(),
    limits: defaultLimits,
    clock,
    log,
  });
  await listener.start();
  t.after(() => listener.close());
  const clientCreds = await credentialsFor(ca, WEB);
  const dialer = new MeshDialer({
    tls: new MeshTls(
      {
        identity: { current: () => clientCreds, onChange: () => {} },
        bundle: { pem: () => ca.trustBundle, onChange: () => {} },
      },
      TD,
    ),
    meshPort: listener.port(),
    clock: systemClock,
    log,
    connectTimeoutMs: 2_000,
  });
  const open = (protocol: (typeof MESH_ALPN)[keyof typeof MESH_ALPN]) =>
    new Promise<Socket>((resolve, reject) =>
      dialer.for(protocol)('127.0.0.2', 5000, (err, s) =>
        s && !err ? resolve(s) : reject(err ?? new Error('no socket')),
      ),
    );
  const rotate = async (): Promise<void> => {
    serverCreds = await credentialsFor(ca, API);
    for (const fn of changed) fn();
  };
  return { listener, dialer, open, rotate, clock };
}

test('the mesh listener rotates its ticket keys with its certificate and hourly: older sessions are not resumed', async (t) => {
  const { dialer, listener, open, rotate, clock } = await pair(t, {
    onTcp: (s) => s.once('data', () => s.end('pong')),
  });
  const connectOnce = async (): Promise<void> => {
    const s = await open(MESH_ALPN.tcp);
    // The tickets follow the handshake; an exchange before the close receives them.
    s.end('ping');
    await new Promise((r) => s.on('close', r).resume());
  };
  await connectOnce();
  await connectOnce();
  assert.equal(dialer.stats.resumed, 1);
  await rotate();
  await connectOnce();
  assert.equal(dialer.stats.resumed, 1, 'a session made under the old certificate is not resumed');
  await connectOnce();
  assert.equal(dialer.stats.resumed, 2);
  await clock.advance(3_600_000);
  await connectOnce();
  assert.equal(dialer.stats.resumed, 2, 'ticket keys older than their lifetime are replaced');
  assert.equal(listener.stats.resumed, 2);
});

test('a mesh peer that does not take h2 is an error, never a plaintext fallback', async (t) => {
  // A listener without an h2 handler offers no h2 in ALPN: the handshake fails.
  const { dialer, open } = await pair(t, {});
  await assert.rejects(open(MESH_ALPN.h2), /no application protocol|does not accept h2/);
  assert.deepEqual(
    { plaintext: dialer.stats.plaintext, notMeshed: dialer.stats.notMeshed },
    { plaintext: 0, notMeshed: 0 },
  );
  // HTTP/1.1 still works on it.
  const s = await open(MESH_ALPN.http1);
  s.destroy();
});
