import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import { connect as h2Connect } from 'node:http2';
import { connect, createServer, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { MeshTls, MESH_ALPN, sniForPort } from '../../../src/mesh/mesh-tls.ts';
import { credentialsFor, fixedSources, testCa } from '../../harness/mesh.ts';
import { forgedIdentityCorpus, FORGED_IDENTITY } from '../proxy/corpus.ts';
import { grpcHeaders, h2Request, startH2Backend, type H2Backend } from '../proxy/h2/h2-harness.ts';
import { exchange, raw, startProxy, type Proxy } from '../proxy/harness.ts';
import { ep, service } from '../routing/fixtures.ts';
import { API, app, listen, meshedSidecar, TD, WEB } from './mesh-harness.ts';

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
/** The transparent ingress's original destination port (the app's, unless a test says otherwise). */
let destination: number;
let watched: Awaited<ReturnType<typeof watchedApp>>;
let h2App: H2Backend;
/** An app that speaks first ("220 hello"), then echoes. */
let greeter: number;
let webTls: MeshTls;

before(async () => {
  const ca = await testCa();
  // The server pod on 127.0.0.2 (127.0.0.2 plays its pod IP for the transparent ingress too).
  apiPort = await app('127.0.0.2', scope);
  destination = apiPort;
  watched = await watchedApp();
  h2App = await startH2Backend(undefined, {}, '127.0.0.2');
  cleanups.push(() => h2App.close());
  const greeterServer = createServer((s) => {
    s.on('error', () => {});
    s.write('220 hello\r\n');
    s.pipe(s);
  });
  cleanups.push(() => greeterServer.close());
  greeter = await listen(greeterServer, '127.0.0.2');
  plaintext = await startProxy(
    { capture: 'transparent', appPorts: [apiPort] },
    {
      originalDestination: () => ({ address: '127.0.0.2', port: destination }),
      isPodAddress: (a) => a === '127.0.0.2',
      // The default; the cut-short request below pauses past it, the silent client waits it out.
      detectTimeoutMs: 1_000,
    },
  );
  cleanups.push(() => plaintext.close());
  const server = await meshedSidecar(scope, {
    host: '127.0.0.2',
    tls: new MeshTls(fixedSources(await credentialsFor(ca, API), ca.trustBundle), TD),
    appPorts: [apiPort, watched.port, h2App.port, greeter],
  });
  webTls = new MeshTls(fixedSources(await credentialsFor(ca, WEB), ca.trustBundle), TD);
  listenerPort = server.meshPort;
  client = await meshedSidecar(scope, { host: '127.0.0.1', peerPort: listenerPort, tls: webTls });
  client.resolver.set(service('shop', 'api', { eps: { http: [ep('127.0.0.2', apiPort)] } }));
});

after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

/** An app like app() that also tells when the next connection to it arrives. */
async function watchedApp() {
  let waiting: (() => void)[] = [];
  const server = createHttpServer((req, res) =>
    res.end(JSON.stringify({ xfcc: req.headers['x-forwarded-client-cert'] ?? null })),
  );
  server.on('connection', () => {
    for (const w of waiting.splice(0)) w();
  });
  cleanups.push(() => {
    server.closeAllConnections();
    server.close();
  });
  const port = await listen(server, '127.0.0.2');
  waiting = [];
  return { port, connected: () => new Promise<void>((r) => waiting.push(r)) };
}

/**
 * Everything the client reads back after sending data (after `ready`, when given) until the
 * connection closes (bounded).
 */
function collect(s: Socket, data: string, ready: Promise<void> = Promise.resolve()): Promise<string> {
  return new Promise((resolve) => {
    let out = '';
    const timer = setTimeout(() => {
      s.destroy();
      resolve(`${out}<<timeout>>`);
    }, 5_000);
    s.setEncoding('latin1');
    s.on('data', (d: string) => (out += d));
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    void ready.then(() => s.write(data, 'latin1'));
  });
}

/** A TLS connection to the mesh port with a real mesh certificate, ALPN outrigger-tcp, for an app port. */
function meshTcp(port: number) {
  return tlsConnect({
    host: '127.0.0.2',
    port: listenerPort,
    servername: sniForPort(port),
    secureContext: webTls.context(),
    checkServerIdentity: webTls.checkServerIdentity,
    ALPNProtocols: [MESH_ALPN.tcp],
  });
}

/** Everything a mesh-certified client reads back after sending data on a TCP stream to the app port. */
function overMeshTcp(data: string, port = apiPort, ready?: () => Promise<void>): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = meshTcp(port);
    s.once('secureConnect', () => {
      if (s.alpnProtocol !== MESH_ALPN.tcp) reject(new Error(`ALPN ${String(s.alpnProtocol)}`));
      resolve(collect(s, data, ready?.()));
    });
    s.once('error', reject);
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

test("h2 prior knowledge inside a TCP stream on the mesh port: the app gets the sidecar's header", async () => {
  const session = h2Connect('http://api.shop', { createConnection: () => meshTcp(h2App.port) });
  cleanups.push(() => session.destroy());
  const r = await h2Request(
    session,
    grpcHeaders('api.shop', undefined, { 'x-forwarded-client-cert': FORGED_IDENTITY }),
    'x',
  );
  assert.equal(r.trailers['grpc-status'], '0', JSON.stringify(r));
  assert.deepEqual(
    h2App.streams.map((h) => h['x-forwarded-client-cert']),
    [`By=${API};URI=${WEB}`],
  );
});

describe('a request line cut short by a pause longer than the detection timeout (1 s)', () => {
  const request = forgedIdentityCorpus[0]?.data ?? '';
  // Either order of the pause and the timer must end the same way; the pause makes the timer first.
  const pause = () => new Promise<void>((r) => setTimeout(r, 1_500));
  const sendCut = (s: Socket): Promise<string> => {
    const reply = collect(s, request.slice(3), pause());
    s.write(request.slice(0, 3), 'latin1');
    return reply;
  };

  test('plaintext transparent ingress', async () => {
    check(await sendCut(connect({ host: '127.0.0.1', port: plaintext.ingress })), null);
  });

  test('TCP stream on the mesh port', async () => {
    const s = meshTcp(apiPort);
    await new Promise((r) => s.once('secureConnect', r));
    check(await sendCut(s), `By=${API};URI=${WEB}`);
  });
});

describe('a client that says nothing before its stream went to the app as TCP', () => {
  const request = forgedIdentityCorpus[0]?.data ?? '';

  test('plaintext transparent ingress: the request is parsed, not streamed', async () => {
    destination = watched.port;
    try {
      const connected = watched.connected();
      const s = connect({ host: '127.0.0.1', port: plaintext.ingress });
      check(await collect(s, request, connected), null);
    } finally {
      destination = apiPort;
    }
  });

  test('TCP stream on the mesh port: the request is parsed, not streamed', async () => {
    const connected = watched.connected();
    check(await overMeshTcp(request, watched.port, () => connected), `By=${API};URI=${WEB}`);
  });

  /** Greeted by an app that speaks first, the client sends an HTTP-looking line: echoed as bytes. */
  const greeted = (s: Socket): Promise<string> =>
    new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`timeout: ${JSON.stringify(out)}`)), 5_000);
      s.setEncoding('latin1');
      s.on('data', (d: string) => {
        out += d;
        if (out === '220 hello\r\n') s.write('GET / HTTP/1.1\r\n');
        if (out.endsWith('HTTP/1.1\r\n')) {
          clearTimeout(timer);
          s.destroy();
          resolve(out);
        }
      });
      s.on('error', reject);
    });

  test('plaintext transparent ingress: an app that speaks first keeps its stream', async () => {
    destination = greeter;
    try {
      const got = await greeted(connect({ host: '127.0.0.1', port: plaintext.ingress }));
      assert.equal(got, '220 hello\r\nGET / HTTP/1.1\r\n');
    } finally {
      destination = apiPort;
    }
  });

  test('TCP stream on the mesh port: an app that speaks first keeps its stream', async () => {
    assert.equal(await greeted(meshTcp(greeter)), '220 hello\r\nGET / HTTP/1.1\r\n');
  });
});
