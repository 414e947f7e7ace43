// Side-by-side data-path benchmark: every target in ONE run, in front of the SAME backend (an
// nginx worker returning a 12-byte body), on loopback only, each phase bounded in time.
//   node scripts/bench/run.ts [--quick] [--rounds 2] [--only a,b] [--rate 1000] [--fixed-only] [--pin]
//                             [--ts] [--json FILE]
// Per target: closed-loop throughput (wrk -t1 -c50, or the Node generator without wrk), then a
// fixed rate with coordinated-omission correction (p50/p99), the target's CPU per 1,000 rps from
// /proc, and its RSS idle and under load. Results print as a Markdown table with ratios to nginx.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { compiledBuild, sourcesBuild, type BenchBuild } from './build.ts';
import { closedLoop, fixedRate, type FixedRateResult, type Percentiles } from './loadgen.ts';
import { gatewayTargets } from './gateway-targets.ts';
import { outriggerTargets } from './outrigger.ts';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const only = flag('--only')?.split(',');
const RATE = Number(flag('--rate') ?? 1000);
const CLOSED_MS = quick ? 3_000 : 8_000;
const WARM_MS = quick ? 1_000 : 2_000;
const FIXED_MS = quick ? 4_000 : 10_000;
const CONNS = 50;
const ROUNDS = Number(flag('--rounds') ?? 2);
/** Only the fixed-rate phase, e.g. a second run at a rate every target sustains. */
const FIXED_ONLY = args.includes('--fixed-only');

export const BACKEND_PORT = 18080;
function have(bin: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${bin}`]).status === 0;
}
const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-bench-'));
const children: ChildProcess[] = [];

export interface BenchTarget {
  name: string;
  port: number;
  authority: string;
  /** Starts the target; returns the processes whose CPU and RSS count as the target's. */
  start(): ChildProcess[] | Promise<ChildProcess[]>;
  /** Resolves when the target can serve (default: its port accepts connections). */
  ready?(): Promise<void>;
  note?: string;
}

/** Kills a child's whole process group (an nginx master's worker survives the master alone). */
function killGroup(c: ChildProcess, sig: NodeJS.Signals): void {
  try {
    if (c.pid) process.kill(-c.pid, sig);
  } catch {
    // already gone
  }
}

function cleanup(): void {
  for (const c of children) killGroup(c, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
}
process.on('exit', cleanup);
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));

/**
 * CPU pinning (--pin, with 2+ CPUs and taskset): the proxy under test on CPU 1, the load generators
 * and the backend on CPU 0. Off by default: on a machine shared with other work, a pinned process
 * cannot move to an idle CPU and every wake-up waits (measured: raw Node proxy p50 at one
 * connection 5.1 ms pinned vs 0.6 ms unpinned).
 */
const CPUS = Number(spawnSync('nproc', { encoding: 'utf8' }).stdout) || 1;
const PIN = args.includes('--pin') && have('taskset') && CPUS >= 2;
export type Cpu = 'target' | 'load';
const pinned = (cpu: Cpu, cmd: string, argv: string[]): [string, string[]] =>
  PIN ? ['taskset', ['-c', cpu === 'target' ? '1' : '0', cmd, ...argv]] : [cmd, argv];

export function launch(
  cmd: string,
  argv: string[],
  opts: { env?: NodeJS.ProcessEnv; cpu?: Cpu } = {},
): ChildProcess {
  [cmd, argv] = pinned(opts.cpu ?? 'target', cmd, argv);
  const child = spawn(cmd, argv, {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: opts.env ?? process.env,
    detached: true, // its own process group, so cleanup reaches every descendant
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
  child.on('exit', (code, sig) => {
    if (code !== 0 && sig !== 'SIGKILL' && sig !== 'SIGTERM')
      process.stderr.write(`bench: ${cmd} exited ${code ?? sig}: ${err}\n`);
  });
  children.push(child);
  return child;
}

export async function waitPort(port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`port ${port} not listening after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The process and all its descendants (nginx master + worker). */
function tree(pid: number): number[] {
  const out = [pid];
  const r = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' });
  for (const c of r.stdout.split(/\s+/).filter(Boolean)) out.push(...tree(Number(c)));
  return out;
}

const TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);

function cpuTicks(pids: number[]): number {
  let sum = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      sum += Number(fields[11]) + Number(fields[12]); // utime + stime
    } catch {
      // exited
    }
  }
  return sum;
}

function rssMb(pids: number[]): number {
  let kb = 0;
  for (const pid of pids) {
    try {
      const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      kb += Number(m?.[1] ?? 0);
    } catch {
      // exited
    }
  }
  return kb / 1024;
}

function nginxConf(name: string, body: string): string {
  const file = path.join(dir, `${name}.conf`);
  writeFileSync(
    file,
    `worker_processes 1;
daemon off;
pid ${dir}/${name}.pid;
error_log ${dir}/${name}-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 65s;
  client_body_temp_path ${dir}/${name}-body;
  proxy_temp_path ${dir}/${name}-proxy;
  ${body}
}
`,
  );
  return file;
}

function startBackend(): ChildProcess {
  const conf = nginxConf(
    'backend',
    `server { listen 127.0.0.1:${BACKEND_PORT}; default_type text/plain; location / { return 200 "hello world\\n"; } }`,
  );
  return launch('nginx', ['-c', conf, '-e', `${dir}/backend-error.log`], { cpu: 'load' });
}

function peerTargets(build: BenchBuild): BenchTarget[] {
  const node = process.execPath;
  const nodeProxy = (kind: string, port: number): BenchTarget => ({
    name: `node ${kind}`,
    port,
    authority: `127.0.0.1:${port}`,
    start: () => [launch(node, [build.nodeProxies, kind, String(port), String(BACKEND_PORT)])],
  });
  const out: BenchTarget[] = [
    { name: 'direct', port: BACKEND_PORT, authority: `127.0.0.1:${BACKEND_PORT}`, start: () => [] },
  ];
  if (have('nginx'))
    out.push({
      name: 'nginx',
      port: 18081,
      authority: '127.0.0.1:18081',
      start: () => {
        const conf = nginxConf(
          'proxy',
          `upstream backend { server 127.0.0.1:${BACKEND_PORT}; keepalive 128; }
  server { listen 127.0.0.1:18081; location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; } }`,
        );
        return [launch('nginx', ['-c', conf, '-e', `${dir}/proxy-error.log`])];
      },
    });
  if (have('haproxy'))
    out.push({
      name: 'haproxy',
      port: 18082,
      authority: '127.0.0.1:18082',
      start: () => {
        const cfg = path.join(dir, 'haproxy.cfg');
        writeFileSync(
          cfg,
          `global
  nbthread 1
  maxconn 4096
defaults
  mode http
  option http-keep-alive
  http-reuse always
  timeout connect 5s
  timeout client 65s
  timeout server 65s
frontend f
  bind 127.0.0.1:18082
  default_backend b
backend b
  server s1 127.0.0.1:${BACKEND_PORT} maxconn 1000
`,
        );
        return [launch('haproxy', ['-f', cfg, '-db'])];
      },
    });
  out.push(nodeProxy('raw', 18083), nodeProxy('http-proxy', 18084), nodeProxy('undici', 18085));
  return out;
}

interface Row {
  name: string;
  rps: number;
  /** Closed-loop rps of each round, to show the spread on a shared machine. */
  rounds: number[];
  closedP50: number;
  closedP99: number;
  closedTool: string;
  fixed: FixedRateResult;
  cpuPer1k: number;
  rssIdle: number;
  rssLoad: number;
  note?: string;
}

function wrk(
  port: number,
  authority: string,
  ms: number,
): { rps: number; p50: number; p99: number } | undefined {
  if (!have('wrk')) return undefined;
  const r = spawnSync(
    ...pinned('load', 'wrk', [
      '-t1',
      `-c${CONNS}`,
      `-d${Math.round(ms / 1000)}s`,
      '--latency',
      '-H',
      `Host: ${authority}`,
      `http://127.0.0.1:${port}/`,
    ]),
    { encoding: 'utf8', timeout: ms + 30_000 },
  );
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(r.stdout)?.[1]);
  const lat = (q: string): number => {
    const m = new RegExp(`\\s${q}%\\s+([\\d.]+)(us|ms|s)`).exec(r.stdout);
    if (!m) return NaN;
    const v = Number(m[1]);
    return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
  };
  if (/Non-2xx|Socket errors/.test(r.stdout)) process.stderr.write(`bench: wrk on ${port}: ${r.stdout}\n`);
  return { rps, p50: lat('50'), p99: lat('99') };
}

async function measure(t: BenchTarget): Promise<Row> {
  const procs = await t.start();
  await (t.ready ? t.ready() : waitPort(t.port));
  const pids = procs.flatMap((p) => (p.pid ? tree(p.pid) : []));
  const target = { host: '127.0.0.1', port: t.port, authority: t.authority };
  // Warm up (JIT, pools), then settle so the idle RSS is after the warm-up's garbage.
  await closedLoop(target, { connections: CONNS, durationMs: WARM_MS });
  await new Promise((r) => setTimeout(r, 1_000));
  const rssIdle = rssMb(pids);

  let closed = FIXED_ONLY ? { rps: NaN, p50: NaN, p99: NaN } : wrk(t.port, t.authority, CLOSED_MS);
  let closedTool = FIXED_ONLY ? 'skipped (--fixed-only)' : 'wrk -t1 -c50';
  if (!closed) {
    const r = await closedLoop(target, { connections: CONNS, durationMs: CLOSED_MS });
    closed = { rps: r.rps, p50: r.latency.p50, p99: r.latency.p99 };
    closedTool = 'node generator, 50 conns';
  }
  await new Promise((r) => setTimeout(r, 500));

  let rssLoad = rssMb(pids);
  const sampler = setInterval(() => (rssLoad = Math.max(rssLoad, rssMb(pids))), 200);
  const before = cpuTicks(pids);
  const fixed = await fixedRate(target, { rate: RATE, durationMs: FIXED_MS, connections: 32 });
  const cpuSeconds = (cpuTicks(pids) - before) / TICKS;
  clearInterval(sampler);
  for (const p of procs) killGroup(p, 'SIGKILL');
  await new Promise((r) => setTimeout(r, 300));
  const cores = cpuSeconds / (FIXED_MS / 1000);
  return {
    name: t.name,
    rps: closed.rps,
    rounds: [closed.rps],
    closedP50: closed.p50,
    closedP99: closed.p99,
    closedTool,
    fixed,
    cpuPer1k: pids.length === 0 ? NaN : cores / (fixed.achievedRps / 1000),
    rssIdle,
    rssLoad,
    ...(t.note ? { note: t.note } : {}),
  };
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Means over rounds; percentiles are averaged per round, not merged. */
function combine(list: Row[]): Row {
  const first = list[0]!;
  const avgP = (pick: (r: Row) => Percentiles): Percentiles => ({
    p50: mean(list.map((r) => pick(r).p50)),
    p90: mean(list.map((r) => pick(r).p90)),
    p99: mean(list.map((r) => pick(r).p99)),
    p999: mean(list.map((r) => pick(r).p999)),
    max: Math.max(...list.map((r) => pick(r).max)),
  });
  return {
    ...first,
    rps: mean(list.map((r) => r.rps)),
    rounds: list.map((r) => r.rps),
    closedP50: mean(list.map((r) => r.closedP50)),
    closedP99: mean(list.map((r) => r.closedP99)),
    fixed: {
      due: list.reduce((a, r) => a + r.fixed.due, 0),
      ok: list.reduce((a, r) => a + r.fixed.ok, 0),
      errors: list.reduce((a, r) => a + r.fixed.errors, 0),
      achievedRps: mean(list.map((r) => r.fixed.achievedRps)),
      corrected: avgP((r) => r.fixed.corrected),
      service: avgP((r) => r.fixed.service),
      lag: avgP((r) => r.fixed.lag),
    },
    cpuPer1k: mean(list.map((r) => r.cpuPer1k)),
    rssIdle: mean(list.map((r) => r.rssIdle)),
    rssLoad: Math.max(...list.map((r) => r.rssLoad)),
  };
}

const f = (n: number, d = 2): string => (Number.isFinite(n) ? n.toFixed(d) : '—');

function rpsCell(r: Row): string {
  if (!Number.isFinite(r.rps)) return '—';
  const rounds = r.rounds.map((x) => (x / 1000).toFixed(1)).join(' / ');
  return `${Math.round(r.rps).toLocaleString('en-US')} (${rounds}k)`;
}

function table(rows: Row[]): string {
  const nginx = rows.find((r) => r.name === 'nginx');
  const direct = rows.find((r) => r.name === 'direct');
  const lines = [
    `| target | closed-loop rps (rounds) | × nginx | p50 / p99 closed (ms) | p50 / p99 at ${RATE} rps, CO-corrected (ms) | added p99 vs direct (ms) | service p99 (ms) | errors | CPU cores per 1k rps | RSS idle / load (MB) |`,
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    const ratio = nginx ? r.rps / nginx.rps : NaN;
    const added = direct ? r.fixed.corrected.p99 - direct.fixed.corrected.p99 : NaN;
    lines.push(
      `| ${r.name} | ${rpsCell(r)} | ${f(ratio)} | ${f(r.closedP50)} / ${f(r.closedP99)} | ${f(r.fixed.corrected.p50)} / ${f(r.fixed.corrected.p99)} | ${r.name === 'direct' ? '—' : f(added)} | ${f(r.fixed.service.p99)} | ${r.fixed.errors} | ${f(r.cpuPer1k, 3)} | ${r.name === 'direct' ? '—' : `${f(r.rssIdle, 0)} / ${f(r.rssLoad, 0)}`} |`,
    );
  }
  return lines.join('\n');
}

/**
 * The generator's own lateness, seen against the direct target (which keeps up): timer granularity
 * and scheduling. Against a saturated target the same figure is the backlog, i.e. the correction.
 */
function lagLine(rows: Row[]): string {
  const direct = rows.find((r) => r.name === 'direct');
  if (!direct) return '';
  const l = direct.fixed.lag;
  return `generator lateness against the direct target (send time after due time): p50 ${f(l.p50)} ms, p99 ${f(l.p99)} ms`;
}

async function main(): Promise<void> {
  if (PIN) spawnSync('taskset', ['-cp', '0', String(process.pid)], { stdio: 'ignore' });
  if (!have('nginx')) throw new Error('nginx is needed as the backend: apt-get install nginx-light');
  startBackend();
  await waitPort(BACKEND_PORT);
  // --ts runs the TypeScript sources (type stripping adds ~18 MB RSS per Node process).
  const build = args.includes('--ts') ? sourcesBuild() : compiledBuild();
  const targets = [
    ...peerTargets(build),
    ...(await outriggerTargets({ dir, backendPort: BACKEND_PORT, launch, main: build.main })),
    ...gatewayTargets({ dir, backendPort: BACKEND_PORT, launch, main: build.main }),
  ];
  const chosen = targets.filter((t) => !only || only.includes(t.name));
  const runs = new Map<string, Row[]>();
  // Alternate the order between rounds so drift on a shared machine hits every target alike.
  for (let round = 0; round < ROUNDS; round++) {
    for (const t of round % 2 === 0 ? chosen : [...chosen].reverse()) {
      process.stderr.write(`bench: round ${round + 1}/${ROUNDS}: ${t.name} ...\n`);
      const list = runs.get(t.name) ?? [];
      list.push(await measure(t));
      runs.set(t.name, list);
    }
  }
  const rows = chosen.map((t) => combine(runs.get(t.name) ?? []));
  const env = `Node ${process.version}, ${CPUS} CPUs, ${spawnSync(
    'sh',
    ['-c', "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
    { encoding: 'utf8' },
  ).stdout.trim()}; nginx ${spawnSync('nginx', ['-v'], { encoding: 'utf8' }).stderr.trim().split('/')[1] ?? '?'}; closed loop ${rows[0]?.closedTool ?? ''} ${CLOSED_MS / 1000} s; fixed rate ${RATE} rps for ${FIXED_MS / 1000} s over 32 connections; ${PIN ? 'proxy pinned to CPU 1, generators and backend to CPU 0' : 'no CPU pinning'}; ${ROUNDS} rounds, order alternating; means shown`;
  process.stdout.write(`${env}\n\n${table(rows)}\n\n${lagLine(rows)}\n`);
  for (const r of rows) if (r.note) process.stdout.write(`- ${r.name}: ${r.note}\n`);
  const json = flag('--json');
  if (json) writeFileSync(json, JSON.stringify({ env, rate: RATE, rows }, null, 2));
}

if (!existsSync('/proc/self/stat')) throw new Error('the benchmark reads /proc: Linux only');
await main();
process.exit(0);
