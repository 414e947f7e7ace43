// What TLS session resumption saves on the mesh port: new mutual-TLS connections per second and CPU
// per connection, with and without resumption. A mesh listener and a mesh dialer in one process on
// loopback (so the CPU is both sides of each handshake); each connection opens, sends one line
// over ALPN outrigger-tcp, reads the answer and closes. Bounded by count and time.
//   node scripts/bench/mesh-handshakes.ts [--connections 3000] [--seconds 10] [--parallel 4]
import type { Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { MeshDialer } from '../../src/mesh/mesh-dialer.ts';
import { MeshListener } from '../../src/mesh/mesh-listener.ts';
import { MESH_ALPN, MeshTls } from '../../src/mesh/mesh-tls.ts';
import { defaultLimits } from '../../src/proxy/server.ts';
import { systemClock } from '../../src/shared/clock.ts';
import { createLogger } from '../../src/shared/log.ts';
import { credentialsFor, fixedSources, testCa } from '../../test/harness/mesh.ts';

const { values: a } = parseArgs({
  options: {
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

const ca = await testCa();
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
const clientTls = new MeshTls(
  fixedSources(await credentialsFor(ca, `spiffe://${TD}/ns/a/sa/client`), ca.trustBundle),
  TD,
);

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

async function run(resumption: boolean) {
  const dialer = new MeshDialer({
    tls: clientTls,
    meshPort: listener.port(),
    clock: systemClock,
    log,
    connectTimeoutMs: 5_000,
    resumption,
  });
  const dial = dialer.for(MESH_ALPN.tcp);
  // Warm-up: JIT, and (with resumption) the first ticket.
  for (let i = 0; i < 50; i++) await once((cb) => dial('127.0.0.1', 9000, cb));
  const before = { ...dialer.stats };
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
  const cpuMs = (used.user + used.system) / 1000;
  return {
    resumption,
    connections: done,
    perSecond: Math.round(done / seconds),
    cpuMsPerConnection: Number((cpuMs / done).toFixed(3)),
    resumedShare: Number(((dialer.stats.resumed - before.resumed) / done).toFixed(3)),
  };
}

const rows = [];
for (const resumption of [false, true, false, true]) rows.push(await run(resumption));
await listener.close();
const line = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;
console.log(
  line(['resumption', 'connections', 'connections/s', 'CPU ms per connection (both sides)', 'resumed']),
);
console.log(line(['---', '---', '---', '---', '---']));
for (const r of rows)
  console.log(
    line([r.resumption ? 'on' : 'off', r.connections, r.perSecond, r.cpuMsPerConnection, r.resumedShare]),
  );
