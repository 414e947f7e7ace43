// HTTP/2 (h2c) and gRPC benchmark rows, on loopback only, each phase bounded in time: h2load
// (Debian's nghttp2-client) sends gRPC-shaped unary calls (a prebuilt length-prefixed message,
// content-type application/grpc, te: trailers) to the same node:http2 backend directly, through
// HAProxy in h2c mode (`proto h2` on both sides), and through Outrigger's egress listener (one hop,
// explicit mode, file source, tracing off). Closed loop (-c clients x -m streams, -D seconds),
// then a fixed rate (--rps per client; p50/p99 from h2load's per-request log). h2load checks only :status, so each target is first
// checked for grpc-status 0 with one call of our own.
//   node scripts/bench/grpc.ts [--rounds 1] [--seconds 8] [--clients 10] [--streams 10] [--rate 1000]
//        [--semi-space MB] [--old-space MB] [--profile DIR]   (--profile: Outrigger's closed loop only, under
//        --cpu-prof, and its top frames per call)
//        [--alloc outrigger|relay] [--top 30]   (--alloc: bytes allocated per call by allocating
//        frame, from V8's sampling heap profiler, in Outrigger or in the bare relay)
//        [--survivors]   (with --alloc: at the fixed rate, only what outlived a scavenge)
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type IncomingHttpHeaders } from 'node:http2';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { serviceYaml } from '../../test/harness/tracing-relay.ts';
import { summarize, type CpuProfile } from './cpuprofile.ts';
import { allocationTable, inspector, sampleAllocations } from './heap-sampling.ts';

const args = process.argv.slice(2);
const flag = (name: string, def: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : def;
};
const SECONDS = flag('--seconds', 8);
const CLIENTS = flag('--clients', 10);
const STREAMS = flag('--streams', 10);
const RATE = flag('--rate', 1000);
const SEMI_SPACE = flag('--semi-space', 4);
/**
 * The old generation's limit for Outrigger and the relay: 256 MB is what Node gives V8 under a
 * pod's memory limit up to 512 MiB (memory.ts says why); 0 leaves V8's sizing for this host, where
 * the old generation grows several times larger between full collections, and so do their pauses.
 */
const OLD_SPACE = flag('--old-space', 256);
const heapFlags = [
  `--max-semi-space-size=${SEMI_SPACE}`,
  ...(OLD_SPACE > 0 ? [`--max-old-space-size=${OLD_SPACE}`] : []),
];
const PROFILE = args.includes('--profile') ? args[args.indexOf('--profile') + 1] : undefined;
const ROUNDS = flag('--rounds', 1);
const ALLOC = args.includes('--alloc') ? args[args.indexOf('--alloc') + 1] : undefined;
const SURVIVORS = args.includes('--survivors');
const INSPECTOR = 18186;
const BACKEND = 18180;
const HAPROXY = 18181;
const RELAY = 18185;
const OUTRIGGER = { egress: 18182, ingress: 18183, admin: 18184 };
const PATH = '/outrigger.v1.TestService/Unary';
const root = path.join(import.meta.dirname, '../..');

if (args[0] === '--backend') {
  // The backend: answers each call with its request message and OK trailers.
  const server = createServer({ settings: { maxConcurrentStreams: 1000 } });
  server.on('stream', (stream) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(Buffer.concat(chunks));
    });
    stream.on('error', () => {});
  });
  server.listen(BACKEND, '127.0.0.1', () => process.stdout.write('listening\n'));
} else if (args[0] === '--relay') {
  relay();
} else {
  await main();
}

async function main(): Promise<void> {
  for (const bin of ['h2load', 'haproxy'])
    if (spawnSync('sh', ['-c', `command -v ${bin}`]).status !== 0)
      throw new Error(`${bin} is needed (apt-get install nghttp2-client haproxy)`);
  const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-bench-grpc-'));
  const children: ChildProcess[] = [];
  const launch = (cmd: string, argv: string[]): ChildProcess => {
    const c = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(c);
    return c;
  };
  process.once('exit', () => {
    for (const c of children) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  // One message of 16 bytes behind the 5-byte gRPC prefix.
  const body = path.join(dir, 'req.bin');
  writeFileSync(body, Buffer.concat([Buffer.from([0, 0, 0, 0, 16]), Buffer.alloc(16, 0x61)]));
  await started(launch(process.execPath, [import.meta.filename, '--backend']));

  const haproxyCfg = path.join(dir, 'haproxy.cfg');
  writeFileSync(
    haproxyCfg,
    [
      'global',
      '  nbthread 1',
      'defaults',
      '  mode http',
      '  timeout connect 1s',
      '  timeout client 30s',
      '  timeout server 30s',
      'frontend f',
      `  bind 127.0.0.1:${HAPROXY} proto h2`,
      '  default_backend b',
      'backend b',
      `  server s1 127.0.0.1:${BACKEND} proto h2`,
      '',
    ].join('\n'),
  );
  launch('haproxy', ['-f', haproxyCfg, '-db']);

  const source = path.join(dir, 'services.yaml');
  writeFileSync(source, serviceYaml('rpc', 'bench', BACKEND, '10.96.0.61'));
  const inspect = (who: string): string[] => (ALLOC === who ? [`--inspect=127.0.0.1:${INSPECTOR}`] : []);
  const outrigger = launch(process.execPath, [
    ...(PROFILE ? ['--cpu-prof', '--cpu-prof-dir', PROFILE] : []),
    ...inspect('outrigger'),
    ...heapFlags,
    path.join(root, 'src/main.ts'),
    'proxy',
    '--source',
    `file:${source}`,
    '--capture',
    'explicit',
    '--namespace',
    'bench',
    '--egress-port',
    String(OUTRIGGER.egress),
    '--ingress-port',
    String(OUTRIGGER.ingress),
    '--admin-port',
    String(OUTRIGGER.admin),
    '--log-level',
    'warn',
  ]);

  const targets = [
    { name: 'direct (node:http2 backend)', port: BACKEND, authority: `127.0.0.1:${BACKEND}` },
    { name: 'haproxy 2.6 h2c, 1 thread', port: HAPROXY, authority: `127.0.0.1:${HAPROXY}` },
    { name: 'bare node:http2 relay', port: RELAY, authority: `127.0.0.1:${RELAY}` },
    { name: 'outrigger 1 hop (egress)', port: OUTRIGGER.egress, authority: 'rpc.bench' },
  ];
  if (PROFILE) return profileOutrigger(outrigger, targets[3]!, body);
  await started(
    launch(process.execPath, [...inspect('relay'), ...heapFlags, import.meta.filename, '--relay']),
  );
  if (ALLOC) return allocations(ALLOC === 'relay' ? targets[2]! : targets[3]!, body);
  const rows: string[] = [];
  // Alternate the order between rounds so that drift hits every target alike.
  const order = (round: number): typeof targets => (round % 2 === 0 ? targets : [...targets].reverse());
  for (let round = 0; round < ROUNDS; round++)
    for (const t of order(round)) {
      await ready(t.port, t.authority);
      const closed = h2load(t.port, t.authority, body, ['-c', String(CLIENTS), '-m', String(STREAMS)]);
      const log = path.join(dir, `${t.port}.log`);
      const fixed = h2load(t.port, t.authority, body, [
        '-c',
        String(CLIENTS),
        '-m',
        '1',
        '--rps',
        String(RATE / CLIENTS),
        `--log-file=${log}`,
      ]);
      const p = percentiles(log);
      rows.push(
        `| ${t.name} (round ${round + 1}) | ${closed.rps} | ${closed.failed} | ${closed.mean} | ${fixed.rps} | ${p.p50} | ${p.p99} | ${fixed.max} |`,
      );
    }
  process.stdout.write(
    `h2load, ${SECONDS} s per phase; closed loop ${CLIENTS} clients x ${STREAMS} streams; fixed ${RATE} rps; ` +
      `Outrigger and the relay with ${heapFlags.join(' ')}\n\n` +
      '| target | closed-loop req/s | failed | mean latency | fixed-rate req/s | p50 | p99 | max |\n' +
      '|---|---|---|---|---|---|---|---|\n' +
      rows.join('\n') +
      '\n',
  );
  process.exit(0);
}

/**
 * The floor node:http2 sets: one upstream session, each stream piped to the backend and its
 * response headers and trailers copied; no routing, no metrics, no tracing.
 */
function relay(): void {
  const upstream = connect(`http://127.0.0.1:${BACKEND}`);
  const server = createServer({ settings: { maxConcurrentStreams: 1000 } });
  server.on('stream', (down, headers) => {
    const up = upstream.request({
      ':method': headers[':method'],
      ':path': headers[':path'],
      'content-type': headers['content-type'],
      te: 'trailers',
    });
    // A client gone mid-call (h2load stops at its deadline) must not crash the relay.
    up.on('response', (h) => {
      if (!down.destroyed)
        down.respond(
          { ':status': h[':status'], 'content-type': h['content-type'] },
          { waitForTrailers: true },
        );
    });
    up.on('trailers', (t: IncomingHttpHeaders) =>
      down.once('wantTrailers', () => down.sendTrailers({ 'grpc-status': String(t['grpc-status']) })),
    );
    up.on('error', () => down.close());
    down.on('error', () => up.close());
    down.on('close', () => up.close());
    down.pipe(up);
    up.pipe(down);
  });
  server.listen(RELAY, '127.0.0.1', () => process.stdout.write('listening\n'));
}

/** Outrigger's closed loop under --cpu-prof; the profile is written when the sidecar exits. */
async function profileOutrigger(
  child: ChildProcess,
  t: { port: number; authority: string },
  body: string,
): Promise<void> {
  await ready(t.port, t.authority);
  const closed = h2load(t.port, t.authority, body, ['-c', String(CLIENTS), '-m', String(STREAMS)]);
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  const file = readdirSync(PROFILE!).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error('no .cpuprofile written');
  const profile = JSON.parse(readFileSync(path.join(PROFILE!, file), 'utf8')) as CpuProfile;
  const calls = Number(closed.rps) * SECONDS;
  process.stdout.write(`${closed.rps} calls/s closed loop\n\n${summarize(profile, calls, 30)}\n`);
  process.exit(0);
}

/**
 * Bytes allocated per call in the process under --alloc, over a closed loop after a warm-up; with
 * --survivors, the bytes per call that outlive a scavenge at the fixed rate (the p99's cost).
 */
async function allocations(
  t: { name: string; port: number; authority: string },
  body: string,
): Promise<void> {
  await ready(t.port, t.authority);
  const load = SURVIVORS
    ? ['-c', String(CLIENTS), '-m', '1', '--rps', String(RATE / CLIENTS)]
    : ['-c', String(CLIENTS), '-m', String(STREAMS)];
  const run = (): ReturnType<typeof h2load> => h2load(t.port, t.authority, body, load);
  run(); // warm-up: optimised code, sessions open
  const call = await inspector(INSPECTOR);
  let r: ReturnType<typeof h2load> | undefined;
  const sites = await sampleAllocations(
    call,
    () => {
      r = run();
    },
    SURVIVORS,
  );
  if (!r) throw new Error('h2load did not run');
  const calls = Number(r.rps) * SECONDS;
  process.stdout.write(
    allocationTable(`${t.name}: ${r.rps} calls/s`, sites, calls, flag('--top', 30), false, SURVIVORS),
  );
  process.exit(0);
}

/** p50 and p99 of the per-request latencies h2load logged (microseconds, third column). */
function percentiles(log: string): { p50: string; p99: string } {
  const us = readFileSync(log, 'utf8')
    .split('\n')
    .map((l) => Number(l.split('\t')[2]))
    .filter((n) => Number.isFinite(n) && n > 0)
    .sort((a, b) => a - b);
  const at = (q: number): string =>
    `${((us[Math.min(us.length - 1, Math.floor(q * us.length))] ?? 0) / 1000).toFixed(2)}ms`;
  return { p50: at(0.5), p99: at(0.99) };
}

function started(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => d.toString().includes('listening') && resolve());
    child.once('exit', (code) => reject(new Error(`backend exited ${code}`)));
  });
}

/** One call of our own until it answers grpc-status 0 (bounded: 20 s). */
async function ready(port: number, authority: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const status = await oneCall(port, authority).catch((e: Error) => e.message);
    if (status === '0') return;
    if (Date.now() > deadline) throw new Error(`127.0.0.1:${port} not answering gRPC: ${status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function oneCall(port: number, authority: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const session = connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const s = session.request({
      ':method': 'POST',
      ':path': PATH,
      ':authority': authority,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status = 'none';
    s.on('response', (h) => h['grpc-status'] !== undefined && (status = String(h['grpc-status'])));
    s.on('trailers', (t: IncomingHttpHeaders) => (status = String(t['grpc-status'])));
    s.on('error', reject);
    s.on('close', () => {
      session.close();
      resolve(status);
    });
    s.resume();
    s.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}

function h2load(
  port: number,
  authority: string,
  body: string,
  extra: string[],
): { rps: string; failed: string; mean: string; max: string } {
  const r = spawnSync(
    'h2load',
    [
      '-D',
      String(SECONDS),
      '--warm-up-time=1',
      '-d',
      body,
      '-H',
      'content-type: application/grpc',
      '-H',
      'te: trailers',
      '-H',
      `:authority: ${authority}`,
      ...extra,
      `http://127.0.0.1:${port}${PATH}`,
    ],
    { encoding: 'utf8', timeout: (SECONDS + 30) * 1000 },
  );
  const out = r.stdout ?? '';
  const rps = /finished in [^,]+, ([\d.]+) req\/s/.exec(out)?.[1] ?? '?';
  const failed = /requests: .* (\d+) failed/.exec(out)?.[1] ?? '?';
  const lat = /time for request:\s+(\S+)\s+(\S+)\s+(\S+)/.exec(out);
  return { rps, failed, mean: lat?.[3] ?? '?', max: lat?.[2] ?? '?' };
}
