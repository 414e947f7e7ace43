// What TLS session resumption saves on the mesh port: new mutual-TLS connections per second and CPU
// per connection, with and without resumption. The mesh listener runs in a child process (its CPU
// is the server's side of each handshake), the mesh dialer here (the client's); both on loopback.
// Each connection opens, sends one line over ALPN outrigger-tcp, reads the answer and closes.
// Bounded by count and time.
//   node scripts/bench/mesh-handshakes.ts [--connections 3000] [--seconds 10] [--parallel 4]
import { fork, type ChildProcess } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import type { Socket } from 'node:net';
import { parseArgs } from 'node:util';
import type { Credentials } from '../../src/mesh/identity-store.ts';
import { MeshDialer } from '../../src/mesh/mesh-dialer.ts';
import { MeshListener } from '../../src/mesh/mesh-listener.ts';
import { MESH_ALPN, MeshTls } from '../../src/mesh/mesh-tls.ts';
import { defaultLimits } from '../../src/proxy/server.ts';
import { systemClock } from '../../src/shared/clock.ts';
import { createLogger } from '../../src/shared/log.ts';
import { credentialsFor, fixedSources, testCa } from '../../test/harness/mesh.ts';

const { values: a } = parseArgs({
  options: {
    serve: { type: 'boolean', default: false },
    connections: { type: 'string', default: '3000' },
    seconds: { type: 'string', default: '10' },
    parallel: { type: 'string', default: '4' },
  },
});
const MAX = Math.min(100_000, Number(a.connections));
const LIMIT_MS = Math.min(60, Number(a.seconds)) * 1000;
const PARALLEL = Math.max(1, Math.min(64, Number(a.parallel)));
const TD = 'cluster.local';
const log = createLogger({ level: 'error' });

/** What the child tells the parent: its port, and credentials of the same CA for the client. */
interface Ready {
  port: number;
  bundle: string;
  client: Omit<Credentials, 'key'> & { key: string };
}

/** The child: a mesh listener; answers "cpu" messages with its CPU time so far (µs). */
async function serve(): Promise<void> {
  const ca = await testCa();
  const client = await credentialsFor(ca, `spiffe://${TD}/ns/a/sa/client`);
  const listener = new MeshListener({
    host: '127.0.0.1',
    port: 0,
    tls: new MeshTls(
      fixedSources(await credentialsFor(ca, `spiffe://${TD}/ns/a/sa/server`), ca.trustBundle),
      TD,
    ),
    allowFrom: () => [],
    handlers: {
      onRequest: (_q, r) => r.end(),
      onTcp: (s) => s.once('data', () => s.end('pong\n')),
    },
    ownPorts: new Set(),
    limits: defaultLimits,
    clock: systemClock,
    log,
  });
  await listener.start();
  process.on('message', (m) => {
    if (m === 'cpu') {
      const u = process.cpuUsage();
      process.send?.({ cpu: u.user + u.system, resumed: listener.stats.resumed });
    } else process.exit(0);
  });
  const ready: Ready = {
    port: listener.port(),
    bundle: ca.trustBundle,
    client: { ...client, key: client.key.export({ format: 'pem', type: 'pkcs8' }).toString() },
  };
  process.send?.(ready);
}

/** Asks the child one question and waits for its answer. */
const ask = (child: ChildProcess, m: string): Promise<{ cpu: number; resumed: number }> =>
  new Promise((resolve) => {
    child.once('message', (r) => resolve(r as { cpu: number; resumed: number }));
    child.send(m);
  });

function once(dial: (cb: (e: Error | null, s?: Socket) => void) => void): Promise<void> {
  return new Promise((resolve, reject) =>
    dial((err, s) => {
      if (err || !s) return reject(err ?? new Error('no socket'));
      s.on('error', reject);
      s.on('close', () => resolve());
      s.resume();
      s.end('ping\n');
    }),
  );
}

async function run(server: ChildProcess, ready: Ready, resumption: boolean) {
  const creds = { ...ready.client, key: createPrivateKey(ready.client.key) };
  const dialer = new MeshDialer({
    tls: new MeshTls(fixedSources(creds, ready.bundle), TD),
    meshPort: ready.port,
    clock: systemClock,
    log,
    connectTimeoutMs: 5_000,
    resumption,
  });
  const dial = dialer.for(MESH_ALPN.tcp);
  // Warm-up: JIT, and (with resumption) the first ticket.
  for (let i = 0; i < 50; i++) await once((cb) => dial('127.0.0.1', 9000, cb));
  const serverBefore = await ask(server, 'cpu');
  const start = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  let done = 0;
  const deadline = Date.now() + LIMIT_MS;
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (done < MAX && Date.now() < deadline) {
        done++;
        await once((cb) => dial('127.0.0.1', 9000, cb));
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const serverAfter = await ask(server, 'cpu');
  const ms = (us: number): number => Number((us / 1000 / done).toFixed(3));
  return {
    resumption,
    connections: done,
    perSecond: Math.round(done / seconds),
    clientMs: ms(used.user + used.system),
    serverMs: ms(serverAfter.cpu - serverBefore.cpu),
    resumedShare: Number(((serverAfter.resumed - serverBefore.resumed) / done).toFixed(3)),
  };
}

async function main(): Promise<void> {
  const server = fork(process.argv[1] ?? '', ['--serve'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const ready = await new Promise<Ready>((r) => server.once('message', (m) => r(m as Ready)));
  const rows = [];
  try {
    for (const resumption of [false, true, false, true]) rows.push(await run(server, ready, resumption));
  } finally {
    server.kill();
  }
  const line = (cells: (string | number)[]): string => `| ${cells.join(' | ')} |`;
  console.log(
    line([
      'resumption',
      'connections',
      'connections/s',
      'server CPU ms/conn',
      'client CPU ms/conn',
      'resumed',
    ]),
  );
  console.log(line(['---', '---', '---', '---', '---', '---']));
  for (const r of rows)
    console.log(
      line([r.resumption ? 'on' : 'off', r.connections, r.perSecond, r.serverMs, r.clientMs, r.resumedShare]),
    );
}

if (a.serve) await serve();
else await main();
