// What a sidecar costs in memory, the way a cluster pays for it: RSS, PSS and USS (private memory,
// Private_Clean + Private_Dirty) of 1 and of N compiled sidecars side by side, each with its own
// ports, one hop to a loopback nginx backend. Per configuration ("variant": allocator, Node flags,
// another git ref) and sidecar count:
//   start    2 s after /readyz, before any request
//   idle     after --idle-s without a request (a pod at rest; the sidecar trims after a quiet spell)
//   closed   every sample (--sample-s) during a closed loop (wrk -t1, 50 connections over the sidecars)
//   fixed    every sample during a fixed rate (the Node generator, --rate over the sidecars)
//   bodies   every sample during --bodies-s of mixed bodies (0 B to 1 MiB, up and down) at
//            --bodies-rate over the sidecars, then the sample 20 s later
//   after    every sample during --after-s without load, and the last one
// with CPU per request (utime + stime of the sidecars / requests) for both load phases; then, for
// one sidecar: USS per idle keep-alive connection (--idle-conns, each has carried one request) and
// per in-flight request (--inflight requests held by a backend that answers when told), and where
// the private bytes are (smaps classes beside the V8 spaces from /metrics).
//
//   node scripts/bench/memory.ts [--sidecars 1,10] [--closed-s 30] [--fixed-s 30] [--rate 1000]
//     [--after-s 60] [--idle-s 20] [--bodies-s 30] [--bodies-rate 300] [--sample-s 1] [--idle-conns 2000,10000] [--inflight 1000] [--rounds 1]
//     [--variant 'name [KEY=VALUE ...] [--node-flag ...] [@git-ref]' ...] [--json FILE]
// A variant's KEY=VALUE pairs go into the sidecars' environment (LD_PRELOAD=jemalloc names Debian's
// libjemalloc2; the word `image` sets the image's allocator: jemalloc with the Dockerfile's
// MALLOC_CONF; without it a variant runs on glibc's malloc), its --flags before main.js (after the shipped --max-semi-space-size), @ref builds
// that ref's src instead of the work tree's. Variants run interleaved, their order reversed every
// other round. Loopback only; every phase is bounded in time and every loop in count.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { httpGet } from '../../test/harness/http-get.ts';
import { serviceYaml } from '../../test/harness/tracing-relay.ts';
import { compiledBuild, refBuild } from './build.ts';
import { mixedBodies, serveBytes, SIZES } from './bodies.ts';
import { fixedRate } from './loadgen.ts';
import { untilAnswers } from './lone-sidecar.ts';
import { sidecarArgs, type SidecarPorts } from './outrigger.ts';
import { BACKEND_PORT, startBackend } from './peers.ts';
import { benchPort, cpuSeconds, dir, have, killGroup, launch, sleep, waitPort } from './procs.ts';
import { breakdown, heapFromMetrics, memOf, type Breakdown, type Mem } from './smaps.ts';
import { parseWrk, wrkArgs, WORKLOADS } from './workloads.ts';

const { values: a } = parseArgs({
  options: {
    sidecars: { type: 'string', default: '1,10' },
    'closed-s': { type: 'string', default: '30' },
    'fixed-s': { type: 'string', default: '30' },
    rate: { type: 'string', default: '1000' },
    connections: { type: 'string', default: '50' },
    'after-s': { type: 'string', default: '60' },
    'idle-s': { type: 'string', default: '20' },
    'bodies-s': { type: 'string', default: '30' },
    'bodies-rate': { type: 'string', default: '300' },
    'sample-s': { type: 'string', default: '1' },
    'idle-conns': { type: 'string', default: '2000,10000' },
    inflight: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '1' },
    variant: { type: 'string', multiple: true },
    json: { type: 'string' },
    'old-space-mb': { type: 'string', default: '256' },
  },
});

const bounded = (v: string, lo: number, hi: number): number => Math.min(hi, Math.max(lo, Number(v) || lo));
const CLOSED_MS = bounded(a['closed-s'], 0, 120) * 1000;
const FIXED_MS = bounded(a['fixed-s'], 0, 120) * 1000;
const AFTER_MS = bounded(a['after-s'], 0, 300) * 1000;
const IDLE_MS = bounded(a['idle-s'], 2, 300) * 1000;
const BODIES_MS = bounded(a['bodies-s'], 0, 600) * 1000;
const BODIES_RATE = bounded(a['bodies-rate'], 1, 2_000);
const SAMPLE_MS = bounded(a['sample-s'], 0.2, 10) * 1000;
const RATE = bounded(a.rate, 1, 20_000);
const CONNECTIONS = bounded(a.connections, 1, 1_000);
const ROUNDS = bounded(a.rounds, 1, 5);
const COUNTS = a.sidecars.split(',').map((n) => bounded(n, 1, 20));
/** File descriptors this process may open: the idle-connection phase stays below it. */
const FD_LIMIT = Number(
  /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? 1024,
);
const IDLE_CONNS = a['idle-conns']
  .split(',')
  .filter(Boolean)
  .map((n) => bounded(n, 1, FD_LIMIT - 500));
const INFLIGHT = bounded(a.inflight, 0, Math.min(5_000, (FD_LIMIT - 500) / 2));
/**
 * Node sizes V8's heap from the cgroup memory limit: under any pod limit up to 512 MiB the old
 * generation's limit is V8's minimum, 256 MB, and V8 then lets it grow by 8 MB plus the young
 * generation's size between full collections (docs/benchmarks.md, "Memory"). On a machine without a limit (24 GB here) the limit is 4 GB and the
 * old generation grows to 4x its live size first: not what a pod runs. 0 leaves V8's own sizing.
 */
const OLD_SPACE_MB = bounded(a['old-space-mb'], 0, 4096);
const JEMALLOC = [
  '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2',
  '/usr/lib/aarch64-linux-gnu/libjemalloc.so.2',
].find((f) => existsSync(f));

const say = (s: string): boolean => process.stderr.write(`memory: ${s}\n`);
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

// ---------------------------------------------------------------- variants

interface Variant {
  name: string;
  env: Record<string, string>;
  nodeFlags: string[];
  main: string;
}

/** The image's allocator: Debian's jemalloc preloaded with the MALLOC_CONF the Dockerfile sets. */
function imageMalloc(): Record<string, string> {
  const conf = /MALLOC_CONF=(\S+)/.exec(
    readFileSync(path.join(import.meta.dirname, '..', '..', 'Dockerfile'), 'utf8'),
  )?.[1];
  if (!JEMALLOC) throw new Error('jemalloc is not installed: apt-get install -y libjemalloc2');
  if (!conf) throw new Error('the Dockerfile sets no MALLOC_CONF');
  return { LD_PRELOAD: JEMALLOC, MALLOC_CONF: conf };
}

function parseVariant(spec: string, workTree: () => string): Variant {
  const [name = 'today', ...tokens] = spec.trim().split(/\s+/);
  const v: Variant = { name, env: {}, nodeFlags: [], main: '' };
  for (const t of tokens) {
    if (t.startsWith('--')) v.nodeFlags.push(t);
    else if (t === 'image') Object.assign(v.env, imageMalloc());
    else if (t.startsWith('@')) v.main = refBuild(t.slice(1));
    else {
      const eq = t.indexOf('=');
      if (eq < 1) throw new Error(`variant ${name}: cannot read ${t} (KEY=VALUE, --flag or @ref)`);
      let value = t.slice(eq + 1);
      if (t.startsWith('LD_PRELOAD=') && value === 'jemalloc') {
        if (!JEMALLOC) throw new Error('jemalloc is not installed: apt-get install -y libjemalloc2');
        value = JEMALLOC;
      }
      v.env[t.slice(0, eq)] = value;
    }
  }
  v.main ||= workTree();
  return v;
}

// ---------------------------------------------------------------- the stage

/** A backend that holds every request on /hold until released: in-flight requests on demand. */
class HoldBackend {
  readonly held: http.ServerResponse[] = [];
  readonly server = http.createServer((req, res) => {
    req.resume();
    if (req.url === '/hold') this.held.push(res);
    else if (!serveBytes(req.url, res)) req.on('end', () => res.end('hello world\n'));
  });
  async listen(): Promise<number> {
    this.server.maxConnections = 20_000;
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return (this.server.address() as AddressInfo).port;
  }
  release(): void {
    for (const res of this.held.splice(0)) res.end('released\n');
  }
}

async function otlpSink(): Promise<number> {
  const sink = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  process.once('exit', () => sink.close());
  return (sink.address() as AddressInfo).port;
}

const portsOf = (i: number): SidecarPorts => ({
  egress: benchPort(300 + 3 * i),
  ingress: benchPort(301 + 3 * i),
  admin: benchPort(302 + 3 * i),
});

interface Stage {
  source: string;
  sink: number;
  hold: HoldBackend;
}

async function startSidecars(stage: Stage, v: Variant, n: number): Promise<ChildProcess[]> {
  const children = Array.from({ length: n }, (_, i) =>
    launch(
      process.execPath,
      sidecarArgs({
        main: v.main,
        source: stage.source,
        ports: portsOf(i),
        otlpPort: stage.sink,
        nodeFlags: [...(OLD_SPACE_MB > 0 ? [`--max-old-space-size=${OLD_SPACE_MB}`] : []), ...v.nodeFlags],
        extra: ['--app-port', String(BACKEND_PORT), '--drain-duration', '1s'],
      }),
      { env: { ...process.env, ...v.env } },
    ),
  );
  for (let i = 0; i < n; i++) await untilAnswers(portsOf(i).admin, '/readyz');
  return children;
}

// ---------------------------------------------------------------- measuring

interface Sample extends Mem {
  /** Seconds since the phase started. */
  t: number;
}

interface Phase {
  /** Per sidecar, its samples. */
  samples: Sample[][];
  requests?: number;
  errors?: number;
  rps?: number;
  cpuUsPerReq?: number;
  p99?: number;
  /** Requests not sent because 256 were already in flight. */
  late?: number;
  /** Body bytes carried per second, both directions. */
  mbPerS?: number;
  load: string;
}

function sampler(pids: number[]): { samples: Sample[][]; stop(): void } {
  const start = performance.now();
  const samples: Sample[][] = pids.map(() => []);
  const take = (): void => {
    const t = (performance.now() - start) / 1000;
    pids.forEach((pid, i) => samples[i]!.push({ t, ...memOf(pid) }));
  };
  take();
  const timer = setInterval(take, SAMPLE_MS);
  return {
    samples,
    stop: () => {
      clearInterval(timer);
      take();
    },
  };
}

function wrkAsync(port: number, ms: number, connections: number): Promise<string> {
  return new Promise((resolve) => {
    const c = spawn('wrk', wrkArgs(port, 'one-hop', ms, connections, WORKLOADS[0]!), {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let out = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const guard = setTimeout(() => c.kill('SIGKILL'), ms + 30_000);
    c.on('exit', () => (clearTimeout(guard), resolve(out)));
  });
}

async function closedPhase(pids: number[]): Promise<Phase> {
  const s = sampler(pids);
  const before = cpuSeconds(pids);
  const per = Math.max(1, Math.round(CONNECTIONS / pids.length));
  const results = (await Promise.all(pids.map((_, i) => wrkAsync(portsOf(i).egress, CLOSED_MS, per)))).map(
    parseWrk,
  );
  const cpu = cpuSeconds(pids) - before;
  s.stop();
  // a wrk that printed no report (killed at its deadline) counts as one error, not as NaN requests
  const finite = (x: number): number => (Number.isFinite(x) ? x : 0);
  const requests = results.reduce((x, r) => x + finite(r.requests), 0);
  return {
    samples: s.samples,
    requests,
    errors: results.reduce((x, r) => x + (Number.isFinite(r.requests) ? r.errors : 1), 0),
    rps: results.reduce((x, r) => x + finite(r.rps), 0),
    cpuUsPerReq: (cpu / requests) * 1e6,
    p99: Math.max(...results.map((r) => r.p99)),
    load: load(),
  };
}

async function fixedPhase(pids: number[]): Promise<Phase> {
  const s = sampler(pids);
  const before = cpuSeconds(pids);
  const results = await Promise.all(
    pids.map((_, i) =>
      fixedRate(
        { host: '127.0.0.1', port: portsOf(i).egress, authority: 'one-hop' },
        {
          rate: RATE / pids.length,
          durationMs: FIXED_MS,
          connections: Math.max(2, Math.round(32 / pids.length)),
        },
      ),
    ),
  );
  const cpu = cpuSeconds(pids) - before;
  s.stop();
  const requests = results.reduce((x, r) => x + r.ok, 0);
  return {
    samples: s.samples,
    requests,
    errors: results.reduce((x, r) => x + r.errors, 0),
    rps: results.reduce((x, r) => x + r.achievedRps, 0),
    cpuUsPerReq: (cpu / requests) * 1e6,
    p99: Math.max(...results.map((r) => r.corrected.p99)),
    load: load(),
  };
}

async function bodiesPhase(pids: number[]): Promise<Phase> {
  const s = sampler(pids);
  const before = cpuSeconds(pids);
  const results = await Promise.all(
    pids.map((_, i) =>
      mixedBodies(
        { port: portsOf(i).egress, authority: 'one-hop-hold' },
        { rate: BODIES_RATE / pids.length, durationMs: BODIES_MS, maxInFlight: 256 },
      ),
    ),
  );
  const cpu = cpuSeconds(pids) - before;
  await sleep(20_000);
  s.stop();
  const requests = results.reduce((x, r) => x + r.ok, 0);
  return {
    samples: s.samples,
    requests,
    errors: results.reduce((x, r) => x + r.errors, 0),
    late: results.reduce((x, r) => x + r.late, 0),
    rps: requests / (BODIES_MS / 1000),
    cpuUsPerReq: (cpu / Math.max(1, requests)) * 1e6,
    mbPerS: results.reduce((x, r) => x + r.bytes, 0) / 1048576 / (BODIES_MS / 1000),
    load: load(),
  };
}

async function afterPhase(pids: number[]): Promise<Phase> {
  const s = sampler(pids);
  await sleep(AFTER_MS);
  s.stop();
  return { samples: s.samples, load: load() };
}

/** The smaps classes of one sidecar next to the V8 figures its /metrics reports. */
async function whereItIs(pid: number, admin: number): Promise<Breakdown> {
  const b = breakdown(pid);
  const anon = memOf(pid).anon;
  const { status, body } = await httpGet(admin, '/metrics');
  if (status !== 200) return b;
  const heap = heapFromMetrics(body);
  // allocator-agnostic: jemalloc's extents look like V8's pages to the smaps classes
  const v8 = Object.entries(heap)
    .filter(([k]) => k.startsWith('V8 ') && !k.endsWith(' used'))
    .reduce((x, [, v]) => x + v, 0);
  return { ...b, ...heap, 'anonymous − V8 committed (malloc, wasm, stacks)': anon - v8 };
}

/** Opens `n` connections to a port, `batch` at a time; each sends `request` and resolves on the first reply bytes (or at once with `waitReply` false). */
async function openConns(
  port: number,
  n: number,
  request: string,
  waitReply: boolean,
  deadlineMs = 60_000,
): Promise<net.Socket[]> {
  const socks: net.Socket[] = [];
  const deadline = Date.now() + deadlineMs;
  for (let i = 0; i < n && Date.now() < deadline; i += 200) {
    const batch = Array.from(
      { length: Math.min(200, n - i) },
      () =>
        new Promise<net.Socket | undefined>((resolve) => {
          const s = net.connect({ host: '127.0.0.1', port });
          const timer = setTimeout(() => (s.destroy(), resolve(undefined)), 10_000);
          s.on('error', () => (clearTimeout(timer), resolve(undefined)));
          s.once('connect', () => {
            s.write(request);
            if (!waitReply) return (clearTimeout(timer), resolve(s));
            s.once('data', () => (clearTimeout(timer), resolve(s)));
          });
        }),
    );
    for (const s of await Promise.all(batch)) if (s) socks.push(s);
  }
  return socks;
}

const GET = (p: string, host = 'one-hop'): string =>
  `GET ${p} HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: outrigger-bench\r\n\r\n`;

interface PerConn {
  n: number;
  opened: number;
  ussDeltaMb: number;
  bytesEach: number;
}

async function perIdleConnection(pid: number, n: number): Promise<PerConn> {
  await sleep(2_000);
  const before = memOf(pid).uss;
  const socks = await openConns(portsOf(0).egress, n, GET('/'), true);
  await sleep(3_000);
  const after = memOf(pid).uss;
  for (const s of socks) s.destroy();
  await sleep(3_000);
  return {
    n,
    opened: socks.length,
    ussDeltaMb: after - before,
    bytesEach: ((after - before) * 1048576) / socks.length,
  };
}

async function perInflight(pid: number, hold: HoldBackend, n: number): Promise<PerConn> {
  await sleep(2_000);
  const before = memOf(pid).uss;
  const socks = await openConns(portsOf(0).egress, n, GET('/hold', 'one-hop-hold'), false);
  const deadline = Date.now() + 30_000;
  while (hold.held.length < socks.length && Date.now() < deadline) await sleep(100);
  await sleep(2_000);
  const after = memOf(pid).uss;
  const held = hold.held.length;
  hold.release();
  await sleep(1_000);
  for (const s of socks) s.destroy();
  await sleep(3_000);
  return {
    n,
    opened: held,
    ussDeltaMb: after - before,
    bytesEach: ((after - before) * 1048576) / Math.max(1, held),
  };
}

interface Run {
  variant: string;
  sidecars: number;
  round: number;
  started: string;
  start: Mem[];
  idle: Mem[];
  closed?: Phase;
  fixed?: Phase;
  bodies?: Phase;
  after?: Phase;
  where: Record<string, Breakdown>;
  idleConns: PerConn[];
  inflight?: PerConn;
}

async function runOne(stage: Stage, v: Variant, n: number, round: number): Promise<Run> {
  say(`${v.name}, ${n} sidecar(s), round ${round + 1}: starting (load average ${load()})`);
  const children = await startSidecars(stage, v, n);
  const pids = children.map((c) => c.pid ?? 0);
  const run: Run = {
    variant: v.name,
    sidecars: n,
    round,
    started: new Date().toISOString(),
    start: [],
    idle: [],
    where: {},
    idleConns: [],
  };
  try {
    await sleep(2_000);
    run.start = pids.map(memOf);
    await sleep(IDLE_MS - 2_000);
    run.idle = pids.map(memOf);
    run.where.idle = await whereItIs(pids[0]!, portsOf(0).admin);
    if (CLOSED_MS > 0) {
      say(`closed loop ${CLOSED_MS / 1000} s`);
      run.closed = await closedPhase(pids);
      run.where.closed = await whereItIs(pids[0]!, portsOf(0).admin);
      await sleep(1_000);
    }
    if (FIXED_MS > 0) {
      say(`${RATE} rps for ${FIXED_MS / 1000} s`);
      run.fixed = await fixedPhase(pids);
      run.where.fixed = await whereItIs(pids[0]!, portsOf(0).admin);
    }
    say(`${AFTER_MS / 1000} s without load`);
    run.after = await afterPhase(pids);
    run.where.after = await whereItIs(pids[0]!, portsOf(0).admin);
    if (BODIES_MS > 0) {
      say(`mixed bodies at ${BODIES_RATE} rps for ${BODIES_MS / 1000} s, then 20 s without load`);
      run.bodies = await bodiesPhase(pids);
    }
    if (n === 1) {
      for (const c of IDLE_CONNS) {
        say(`${c} idle keep-alive connections`);
        run.idleConns.push(await perIdleConnection(pids[0]!, c));
      }
      if (INFLIGHT > 0) {
        say(`${INFLIGHT} requests in flight`);
        run.inflight = await perInflight(pids[0]!, stage.hold, INFLIGHT);
      }
    }
  } finally {
    for (const c of children) killGroup(c, 'SIGKILL');
    await sleep(500);
  }
  return run;
}

// ---------------------------------------------------------------- reporting

const f0 = (x: number | undefined): string => (x === undefined || Number.isNaN(x) ? '—' : x.toFixed(0));
const f1 = (x: number | undefined): string => (x === undefined || Number.isNaN(x) ? '—' : x.toFixed(1));
const maxOf = (xs: number[]): number => Math.max(...xs.filter((x) => !Number.isNaN(x)));
const meanOf = (xs: number[]): number => xs.reduce((x, y) => x + y, 0) / xs.length;

/** "max" over sidecars and samples; for N sidecars also the mean of the sidecars' own maxima. */
function peak(p: Phase | undefined, key: keyof Mem): string {
  if (!p) return '—';
  const per = p.samples.map((s) => maxOf(s.map((x) => x[key])));
  return p.samples.length === 1 ? f1(per[0]) : `${f1(meanOf(per))} (${f1(maxOf(per))})`;
}

function last(p: Phase | undefined, key: keyof Mem): string {
  if (!p) return '—';
  const per = p.samples.map((s) => s.at(-1)![key]);
  return p.samples.length === 1 ? f1(per[0]) : `${f1(meanOf(per))} (${f1(maxOf(per))})`;
}

function atRest(ms: Mem[], key: keyof Mem): string {
  const xs = ms.map((m) => m[key]);
  return xs.length === 1 ? f1(xs[0]) : `${f1(meanOf(xs))} (${f1(maxOf(xs))})`;
}

function report(runs: Run[]): string {
  const out: string[] = [];
  out.push(
    `Node ${process.version}; ${new Date().toISOString()}; ${spawnSync('nproc', { encoding: 'utf8' }).stdout.trim()} CPUs; ` +
      `closed loop wrk -t1, ${CONNECTIONS} connections over the sidecars, ${CLOSED_MS / 1000} s; ` +
      `${RATE} rps over the sidecars for ${FIXED_MS / 1000} s; samples every ${SAMPLE_MS / 1000} s; ` +
      `after: ${AFTER_MS / 1000} s; open-files limit ${FD_LIMIT}; ${OLD_SPACE_MB ? `--max-old-space-size=${OLD_SPACE_MB} (as in a pod)` : "V8's own heap sizing"}. MB per sidecar; with several sidecars ` +
      "the mean of the sidecars, the worst in brackets; load = peak over the phase's samples.",
    '',
    `| variant | sidecars | start RSS / PSS / USS | idle ${IDLE_MS / 1000} s RSS / PSS / USS | closed: rps, CPU µs/req | closed peak RSS / PSS / USS | fixed: rps, p99 ms, CPU µs/req | fixed peak RSS / PSS / USS | after: RSS / PSS / USS | load avg |`,
    '|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const r of runs) {
    const trio = (g: (k: keyof Mem) => string): string => `${g('rss')} / ${g('pss')} / ${g('uss')}`;
    out.push(
      `| ${r.variant}${ROUNDS > 1 ? ` (${r.round + 1})` : ''} | ${r.sidecars} | ${trio((k) => atRest(r.start, k))} | ${trio((k) => atRest(r.idle, k))} | ${f0(r.closed?.rps)}, ${f0(r.closed?.cpuUsPerReq)}${r.closed?.errors ? ` (${r.closed.errors} errors)` : ''} | ${trio((k) => peak(r.closed, k))} | ${f0(r.fixed?.rps)}, ${f1(r.fixed?.p99)}, ${f0(r.fixed?.cpuUsPerReq)}${r.fixed?.errors ? ` (${r.fixed.errors} errors)` : ''} | ${trio((k) => peak(r.fixed, k))} | ${trio((k) => last(r.after, k))} | ${r.fixed?.load ?? r.closed?.load ?? load()} |`,
    );
  }
  if (runs.some((r) => r.bodies)) {
    out.push(
      '',
      `Mixed bodies (${SIZES.map((b) => (b >= 1024 ? `${b / 1024} KiB` : `${b} B`)).join(', ')}; uploads and downloads alternate) at ${BODIES_RATE} rps over the sidecars for ${BODIES_MS / 1000} s, at most 256 in flight per sidecar; MB as above:`,
      '',
      '| variant | sidecars | rps, body MB/s, errors, late, CPU µs/req | peak RSS / PSS / USS | 20 s after: RSS / PSS / USS |',
      '|---|---|---|---|---|',
    );
    for (const r of runs.filter((x) => x.bodies)) {
      const b = r.bodies!;
      const trio = (g: (k: keyof Mem) => string): string => `${g('rss')} / ${g('pss')} / ${g('uss')}`;
      out.push(
        `| ${r.variant}${ROUNDS > 1 ? ` (${r.round + 1})` : ''} | ${r.sidecars} | ${f0(b.rps)}, ${f1(b.mbPerS)}, ${b.errors ?? 0}, ${b.late ?? 0}, ${f0(b.cpuUsPerReq)} | ${trio((k) => peak(b, k))} | ${trio((k) => last(b, k))} |`,
      );
    }
  }
  const single = runs.filter((r) => r.sidecars === 1);
  if (single.some((r) => r.idleConns.length > 0 || r.inflight)) {
    out.push(
      '',
      '| variant | USS per idle keep-alive connection | USS per in-flight request |',
      '|---|---|---|',
    );
    for (const r of single)
      out.push(
        `| ${r.variant} | ${r.idleConns.map((c) => `${(c.bytesEach / 1024).toFixed(1)} KiB (${c.opened} conns, +${f1(c.ussDeltaMb)} MB)`).join('; ')} | ${r.inflight ? `${(r.inflight.bytesEach / 1024).toFixed(1)} KiB (${r.inflight.opened} held, +${f1(r.inflight.ussDeltaMb)} MB)` : '—'} |`,
      );
  }
  for (const r of single) {
    const keys = [...new Set(Object.values(r.where).flatMap((b) => Object.keys(b)))].sort();
    const phases = Object.keys(r.where);
    out.push(
      '',
      `Where the private memory is (${r.variant}, round ${r.round + 1}; MB; smaps classes are private bytes, V8 figures committed / used):`,
      '',
      `| class | ${phases.join(' | ')} |`,
      `|---|${phases.map(() => '---').join('|')}|`,
    );
    for (const k of keys.filter(
      (k) => !k.endsWith(' used') && phases.some((p) => (r.where[p]![k] ?? 0) >= 0.05),
    ))
      out.push(
        `| ${k} | ${phases.map((p) => `${f1(r.where[p]![k])}${r.where[p]![`${k} used`] !== undefined ? ` / ${f1(r.where[p]![`${k} used`])}` : ''}`).join(' | ')} |`,
      );
    const series = (p: Phase | undefined): string => p?.samples[0]?.map((s) => f0(s.uss)).join(' ') ?? '—';
    out.push(
      '',
      `USS samples (${r.variant}): closed ${series(r.closed)}; fixed ${series(r.fixed)}; after ${series(r.after)}; bodies ${series(r.bodies)}`,
    );
  }
  return out.join('\n') + '\n';
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  if (!have('nginx')) throw new Error('nginx is needed as the backend: apt-get install nginx-light');
  if (CLOSED_MS > 0 && !have('wrk'))
    throw new Error('wrk is needed for the closed loop: apt-get install wrk');
  startBackend();
  await waitPort(BACKEND_PORT);
  const hold = new HoldBackend();
  const holdPort = await hold.listen();
  const source = path.join(dir, 'services.yaml');
  writeFileSync(
    source,
    serviceYaml('one-hop', 'bench', BACKEND_PORT, '10.96.0.51') +
      '---\n' +
      // /hold on this Service reaches the holding backend
      serviceYaml('one-hop-hold', 'bench', holdPort, '10.96.0.52'),
  );
  const stage: Stage = { source, sink: await otlpSink(), hold };
  let tree: string | undefined;
  const workTree = (): string => (tree ??= compiledBuild().main);
  const variants = (a.variant ?? ['today image']).map((s) => parseVariant(s, workTree));
  const runs: Run[] = [];
  for (let round = 0; round < ROUNDS; round++)
    for (const n of COUNTS)
      for (const v of round % 2 === 0 ? variants : [...variants].reverse())
        runs.push(await runOne(stage, v, n, round));
  hold.server.close();
  if (a.json) writeFileSync(a.json, JSON.stringify(runs, null, 1));
  process.stdout.write(report(runs));
}

await main();
process.exit(0);
