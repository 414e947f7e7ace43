import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as h2connect, createServer as createH2Server, type ClientHttp2Session } from 'node:http2';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { connect as tlsConnect, createServer as createTlsServer } from 'node:tls';
import { ep, service } from '../routing/fixtures.ts';
import { closedPort, metric, startProxy, type Proxy } from './harness.ts';
import { selfSigned } from '../../harness/tls-certs.ts';
import {
  grpc,
  startGrpcBackend,
  testService,
  unary,
  type GrpcBackend,
  type TestClient,
} from '../../harness/grpc.ts';

/**
 * Explicit capture, CONNECT to a Service port whose appProtocol is grpc: the sidecar serves the
 * tunnel's HTTP/2 itself only when the client's first bytes are the h2c preface. gRPC over TLS
 * (grpc_proxy with TLS credentials, the first byte 0x16) must reach the endpoint's TLS server as an
 * opaque stream, and h2c through the same port is still balanced call by call.
 */
const pem = selfSigned('rpc.prod', 'secure.prod');
let proxy: Proxy;
const dual: { server: Server; port: number }[] = [];
let grpcTls: GrpcBackend[];
let banner: Server;

/**
 * One endpoint speaking TLS and h2c on one port, told apart by the first byte, as a gRPC server
 * with optional TLS does. TLS answers `tls <port> <bytes>`; h2c answers every request `h2c <port>`.
 */
async function dualBackend(): Promise<{ server: Server; port: number }> {
  const state = { port: 0 };
  const tls = createTlsServer({ cert: pem.cert, key: pem.key }, (s) => {
    s.on('data', (d: Buffer) => s.write(`tls ${state.port} ${d.toString()}`));
    s.on('error', () => {});
  });
  const h2 = createH2Server((_req, res) => res.end(`h2c ${state.port}`));
  h2.on('sessionError', () => {});
  const server = createServer((sock) => {
    sock.on('error', () => {});
    sock.once('data', (d: Buffer) => {
      sock.pause();
      sock.unshift(d);
      (d[0] === 0x16 ? tls : h2).emit('connection', sock);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.port = (server.address() as AddressInfo).port;
  return { server, port: state.port };
}

before(async () => {
  for (let i = 0; i < 3; i++) dual.push(await dualBackend());
  grpcTls = [];
  const creds = grpc.ServerCredentials.createSsl(null, [
    { cert_chain: Buffer.from(pem.cert), private_key: Buffer.from(pem.key) },
  ]);
  for (let i = 0; i < 2; i++) grpcTls.push(await startGrpcBackend('127.0.0.1:0', creds));
  // A server that speaks first, as SMTP or MySQL do: its client says nothing into the tunnel.
  banner = createServer((s) => s.end('220 banner\r\n'));
  await new Promise<void>((r) => banner.listen(0, '127.0.0.1', r));
  const dead = await closedPort();
  proxy = await startProxy();
  const grpcPort = [{ name: 'grpc', port: 9000, protocol: 'TCP' as const, appProtocol: 'grpc' }];
  proxy.resolver.set(
    service('prod', 'rpc', { ports: grpcPort, eps: { grpc: dual.map((d) => ep('127.0.0.1', d.port)) } }),
  );
  proxy.resolver.set(
    service('prod', 'secure', {
      ports: grpcPort,
      eps: { grpc: grpcTls.map((b) => ep('127.0.0.1', b.port)) },
    }),
  );
  const bannerPort = (banner.address() as AddressInfo).port;
  proxy.resolver.set(
    service('prod', 'banner', { ports: grpcPort, eps: { grpc: [ep('127.0.0.1', bannerPort)] } }),
  );
  proxy.resolver.set(service('prod', 'down', { ports: grpcPort, eps: { grpc: [ep('127.0.0.1', dead)] } }));
});

after(async () => {
  await proxy.close();
  for (const d of dual) d.server.close();
  for (const b of grpcTls) await b.close();
  banner.close();
});

/** A CONNECT tunnel through the egress listener: the socket after the 200 (bounded: 5 s). */
function tunnel(target: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(proxy.egress, '127.0.0.1');
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no answer to CONNECT ${target}`));
    }, 5_000);
    let got = Buffer.alloc(0);
    const onData = (d: Buffer): void => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      clearTimeout(timer);
      s.off('data', onData);
      const head = got.subarray(0, end).toString('latin1');
      if (!head.startsWith('HTTP/1.1 200')) {
        s.destroy();
        return reject(new Error(`CONNECT ${target}: ${head}`));
      }
      s.pause();
      if (got.length > end + 4) s.unshift(got.subarray(end + 4));
      resolve(s);
    };
    s.on('data', onData);
    s.on('error', reject);
    s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  });
}

/** A TLS handshake and one exchange through a CONNECT tunnel; the answer, or the error. */
async function tlsThrough(target: string, servername: string, say: string): Promise<string> {
  const raw = await tunnel(target);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      tls.destroy();
      resolve('error: no answer within 5 s');
    }, 5_000);
    const tls = tlsConnect({ socket: raw, servername, ca: pem.cert }, () => tls.write(say));
    tls.once('data', (d: Buffer) => {
      clearTimeout(timer);
      tls.destroy();
      resolve(d.toString());
    });
    tls.on('error', (e: Error) => {
      clearTimeout(timer);
      resolve(`error: ${e.message}`);
    });
  });
}

test('a TLS client through CONNECT to a grpc-appProtocol port gets its handshake and its answer', async () => {
  const ports = new Set(dual.map((d) => String(d.port)));
  for (let i = 0; i < 3; i++) {
    const answer = await tlsThrough('rpc.prod:9000', 'rpc.prod', `hello ${i}`);
    const [kind, port, ...rest] = answer.split(' ');
    assert.equal(kind, 'tls', answer);
    assert.ok(ports.has(port ?? ''), answer);
    assert.equal(rest.join(' '), `hello ${i}`);
  }
});

test('gRPC over TLS through grpc_proxy to a grpc-appProtocol port: every call answered', async () => {
  const Client = grpc.makeGenericClientConstructor(testService, 'TestService');
  process.env.grpc_proxy = `http://127.0.0.1:${proxy.egress}`;
  let client: TestClient;
  try {
    client = new Client('secure.prod:9000', grpc.credentials.createSsl(Buffer.from(pem.cert)), {
      'grpc.initial_reconnect_backoff_ms': 100,
    }) as unknown as TestClient;
  } finally {
    delete process.env.grpc_proxy;
  }
  try {
    for (let i = 0; i < 6; i++) {
      const r = await unary(client, { text: `t${i}` }, new grpc.Metadata(), { deadline: Date.now() + 5_000 });
      assert.equal(r.error, undefined, r.error?.message);
      assert.equal(r.reply?.text, `t${i}`);
    }
  } finally {
    client.close();
  }
  // One TLS connection through one tunnel: opaque to the sidecar, so one endpoint has every call.
  assert.deepEqual(
    grpcTls.map((b) => b.calls).sort((a, b) => a - b),
    [0, 6],
  );
});

test('h2c through CONNECT to the same port is still served by the sidecar and balanced per request', async () => {
  const raw = await tunnel('rpc.prod:9000');
  const session: ClientHttp2Session = h2connect('http://rpc.prod:9000', { createConnection: () => raw });
  session.on('error', () => {});
  const get = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const req = session.request({ ':path': '/' });
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => resolve(body));
      req.on('error', reject);
      req.end();
    });
  const seen = new Map<string, number>();
  try {
    for (let i = 0; i < 9; i++) {
      const body = await get();
      assert.match(body, /^h2c \d+$/);
      seen.set(body, (seen.get(body) ?? 0) + 1);
    }
  } finally {
    session.destroy();
  }
  // Round robin over three endpoints, inside one tunnel.
  assert.deepEqual([...seen.keys()].sort(), dual.map((d) => `h2c ${d.port}`).sort());
  assert.deepEqual([...seen.values()], [3, 3, 3]);
});

/** Everything the tunnel's far side sends until it closes (bounded: 5 s). */
function drain(s: Socket): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const timer = setTimeout(() => {
      s.destroy();
      resolve(`${got}<<timeout>>`);
    }, 5_000);
    s.setEncoding('latin1');
    s.on('data', (d: string) => (got += d));
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      resolve(got);
    });
    s.resume();
  });
}

test('a client that stays silent in the tunnel gets an opaque stream: a server that speaks first is heard', async () => {
  assert.equal(await drain(await tunnel('banner.prod:9000')), '220 banner\r\n');
});

test('a non-h2c tunnel whose endpoint refuses is closed (the 200 is already sent) and counted as failed', async () => {
  const s = await tunnel('down.prod:9000');
  s.write(Buffer.from([0x16, 0x03, 0x01, 0x00, 0x00]));
  assert.equal(await drain(s), '');
  assert.equal(
    await metric(proxy, 'outrigger_requests_total', {
      service: 'prod/down',
      status: '200',
      error: 'upstream_failed',
    }),
    1,
  );
});
