import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as tlsConnect } from 'node:tls';
import { MeshTls, MESH_ALPN, sniForPort } from '../../../src/mesh/mesh-tls.ts';
import { credentialsFor, fixedSources, testCa } from '../../harness/mesh.ts';
import { forgedIdentityCorpus, FORGED_IDENTITY } from '../proxy/corpus.ts';
import { exchange, raw, startProxy, type Proxy } from '../proxy/harness.ts';
import { ep, service } from '../routing/fixtures.ts';
import { API, app, freePort, meshedSidecar, TD, WEB } from './mesh-harness.ts';

/**
 * The forged-identity corpus through every way bytes reach an app: the plaintext ingress under
 * transparent capture (sniffed), a TCP stream (ALPN outrigger-tcp) on the mesh port from a client
 * holding a real mesh certificate, and a CONNECT tunnel through a meshed client's egress. The app
 * answers with the x-forwarded-client-cert it got.
 */
type Scope = { after(fn: () => unknown): void };
const cleanups: (() => unknown)[] = [];
const scope: Scope = { after: (fn) => void cleanups.push(fn) };

let plaintext: Proxy;
let client: Awaited<ReturnType<typeof meshedSidecar>>;
let listenerPort: number;
let apiPort: number;
let webTls: MeshTls;

before(async () => {
  const ca = await testCa();
  // The server pod on 127.0.0.2 (127.0.0.2 plays its pod IP for the transparent ingress too).
  apiPort = await app('127.0.0.2', scope);
  plaintext = await startProxy(
    { capture: 'transparent', appPorts: [apiPort] },
    {
      originalDestination: () => ({ address: '127.0.0.2', port: apiPort }),
      isPodAddress: (a) => a === '127.0.0.2',
      detectTimeoutMs: 2_000,
    },
  );
  cleanups.push(() => plaintext.close());
  listenerPort = await freePort('127.0.0.2');
  await meshedSidecar(scope, {
    host: '127.0.0.2',
    meshPort: listenerPort,
    tls: new MeshTls(fixedSources(await credentialsFor(ca, API), ca.trustBundle), TD),
    appPorts: [apiPort],
  });
  webTls = new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD);
  client = await meshedSidecar(scope, { host: '127.0.0.1', meshPort: listenerPort, tls: webTls });
  client.resolver.set(service('shop', 'api', { eps: { http: [ep('127.0.0.2', apiPort)] } }));
});

after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

/** Everything a mesh-certified client reads back after sending data on a TCP stream to the app port. */
function overMeshTcp(data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({
      host: '127.0.0.2',
      port: listenerPort,
      servername: sniForPort(apiPort),
      secureContext: webTls.context(),
      checkServerIdentity: webTls.checkServerIdentity,
      ALPNProtocols: [MESH_ALPN.tcp],
    });
    let out = '';
    const timer = setTimeout(() => {
      s.destroy();
      resolve(`${out}<<timeout>>`);
    }, 5_000);
    s.setEncoding('latin1');
    s.on('data', (d: string) => (out += d));
    s.once('secureConnect', () => {
      if (s.alpnProtocol !== MESH_ALPN.tcp) reject(new Error(`ALPN ${String(s.alpnProtocol)}`));
      s.write(data, 'latin1');
    });
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
  });
}

/**
 * The reply must be an HTTP answer; when the app answered, it saw `expected` as the caller, never
 * the forged identity.
 */
function check(reply: string, expected: string | null): void {
  assert.ok(!reply.endsWith('<<timeout>>'), `answered in time: ${JSON.stringify(reply.slice(0, 200))}`);
  assert.ok(!reply.includes(FORGED_IDENTITY), `the forged identity reached the app: ${reply.slice(-300)}`);
  const status = /^HTTP\/1\.[01] (\d{3}) /.exec(reply)?.[1];
  assert.ok(status, `an HTTP answer: ${JSON.stringify(reply.slice(0, 200))}`);
  if (status === '200')
    assert.deepEqual(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4)), { xfcc: expected });
  else assert.match(status, /^4\d\d$/, reply.slice(0, 200));
}

describe('a forged x-forwarded-client-cert never reaches the app', () => {
  for (const c of forgedIdentityCorpus) {
    test(`plaintext transparent ingress: ${c.name}`, async () => {
      check(await raw(plaintext.ingress, c.data), null);
    });
    test(`TCP stream on the mesh port (ALPN outrigger-tcp): ${c.name}`, async () => {
      check(await overMeshTcp(c.data), `By=${API};URI=${WEB}`);
    });
    test(`CONNECT through a meshed client's egress: ${c.name}`, async () => {
      const reply = await exchange(
        client.egress,
        'CONNECT api.shop:80 HTTP/1.1\r\nHost: api.shop:80\r\n\r\n',
        c.data,
      );
      const established = 'HTTP/1.1 200 Connection Established\r\n\r\n';
      assert.ok(reply.startsWith(established), reply.slice(0, 200));
      check(reply.slice(established.length), `By=${API};URI=${WEB}`);
    });
  }
});
