import assert from 'node:assert/strict';
import { connect } from 'node:tls';
import { after, before, test } from 'node:test';
import { Certificates } from '../../../src/gateway/certs.ts';
import { GatewayListeners } from '../../../src/gateway/listeners.ts';
import { objectKey, slimTlsSecret, type TlsSecret } from '../../../src/gateway/objects.ts';
import { RouteTable } from '../../../src/gateway/table.ts';
import { defaultLimits } from '../../../src/proxy/server.ts';
import { systemClock } from '../../../src/shared/clock.ts';
import { httpsBody } from '../../harness/http-get.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';
import { ingress } from './ingress-fixtures.ts';
import { selfSigned, tlsSecretObject } from '../../harness/tls-certs.ts';

const pems = {
  a: selfSigned('a.example.com'),
  a2: selfSigned('a.example.com'),
  wild: selfSigned('*.b.example.com'),
  other: selfSigned('c.example.org'),
  fallback: selfSigned('default.gateway'),
};
const secret = (ns: string, name: string, pem: { cert: string; key: string }): TlsSecret =>
  slimTlsSecret(tlsSecretObject(ns, name, pem)) as TlsSecret;

const table = new RouteTable([
  ingress({
    name: 'shop',
    namespace: 'shop',
    rules: [{ host: 'a.example.com', paths: [{ path: '/', svc: 'web' }] }],
    tls: [
      { hosts: ['a.example.com'], secretName: 'a-tls' },
      { hosts: ['*.b.example.com'], secretName: 'wild-tls' },
    ],
  }),
  ingress({ name: 'org', namespace: 'org', tls: [{ hosts: ['c.example.org'], secretName: 'c-tls' }] }),
]);
let secrets: Map<string, TlsSecret>;
const log = memoryLogger('debug');
const certs = new Certificates(log);
let listeners: GatewayListeners;
let port = 0;

function setSecrets(list: TlsSecret[], defaultSecret?: string): void {
  secrets = new Map(list.map((s) => [objectKey(s.metadata), s]));
  certs.update(table, secrets, defaultSecret);
  listeners.refreshDefaultCertificate();
}

/** The subject CN of the certificate the gateway presents for servername ('' sends no SNI). */
function presented(servername: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({
      host: '127.0.0.1',
      port,
      ...(servername ? { servername } : {}),
      rejectUnauthorized: false,
    });
    s.once('secureConnect', () => {
      const cn = s.getPeerCertificate().subject?.CN;
      s.destroy();
      resolve(String(cn));
    });
    s.once('error', reject);
  });
}

before(async () => {
  listeners = new GatewayListeners({
    http: { host: '127.0.0.1', port: 0 },
    https: { host: '127.0.0.1', port: 0 },
    limits: defaultLimits,
    handler: {
      onRequest: (req, res) =>
        res.end(
          `hello ${req.headers.host} ${(req.socket as { encrypted?: boolean }).encrypted ? 'tls' : 'plain'}`,
        ),
      onUpgrade: (_req, socket) => socket.destroy(),
      onStream: (stream) => stream.close(),
    },
    certs,
    log,
    clock: systemClock,
  });
  await listeners.start();
  port = listeners.ports().https ?? 0;
  setSecrets(
    [
      secret('shop', 'a-tls', pems.a),
      secret('shop', 'wild-tls', pems.wild),
      secret('org', 'c-tls', pems.other),
      secret('gw', 'default', pems.fallback),
    ],
    'gw/default',
  );
});
after(() => listeners.close());

test('SNI picks the Secret of the host: exact, one-label wildcard, several namespaces', async () => {
  assert.equal(await presented('a.example.com'), 'a.example.com');
  assert.equal(await presented('x.b.example.com'), '*.b.example.com');
  assert.equal(await presented('c.example.org'), 'c.example.org');
});

test('a name no Ingress covers, and a client without SNI, get the default certificate', async () => {
  assert.equal(await presented('unknown.example.net'), 'default.gateway');
  assert.equal(await presented('y.x.b.example.com'), 'default.gateway');
  assert.equal(await presented(''), 'default.gateway');
});

test('HTTPS requests reach the handler over the same limited HTTP server', async () => {
  const body = await httpsBody(port, '/', 'a.example.com', { rejectUnauthorized: false });
  assert.equal(body, 'hello a.example.com tls');
});

test('a rotated Secret is served from the next handshake; a broken update keeps the last good one', async () => {
  const serialOf = async (): Promise<string> =>
    new Promise((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port, servername: 'a.example.com', rejectUnauthorized: false });
      s.once('secureConnect', () => {
        const serial = s.getPeerCertificate().serialNumber;
        s.destroy();
        resolve(serial);
      });
      s.once('error', reject);
    });
  const before = await serialOf();
  const current = [...secrets.values()].filter((s) => s.metadata.name !== 'a-tls');
  setSecrets([...current, secret('shop', 'a-tls', pems.a2)], 'gw/default');
  const rotated = await serialOf();
  assert.notEqual(rotated, before);
  setSecrets([...current, secret('shop', 'a-tls', { cert: 'garbage', key: pems.a2.key })], 'gw/default');
  assert.equal(await serialOf(), rotated);
  assert.ok(
    log.lines.some((l) => l.msg === 'TLS Secret unusable; not served' && l.tlsSecret === 'shop/a-tls'),
  );
});

test('the default certificate changes live; without one an uncovered name fails the handshake', async () => {
  const list = [...secrets.values()].filter((s) => s.metadata.name !== 'default');
  setSecrets([...list, secret('gw', 'default2', pems.other)], 'gw/default2');
  assert.equal(await presented('unknown.example.net'), 'c.example.org');
  assert.equal(await presented(''), 'c.example.org');
  setSecrets(list, undefined);
  await assert.rejects(presented('unknown.example.net'));
  assert.equal(await presented('a.example.com'), 'a.example.com');
});
