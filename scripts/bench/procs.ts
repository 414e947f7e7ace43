// Process plumbing shared by the benchmark scripts: children in their own process groups (killed
// at exit, also on errors and Ctrl-C), CPU and RSS read from /proc, a scratch directory.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

export function have(bin: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${bin}`]).status === 0;
}

export const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-bench-'));
const children: ChildProcess[] = [];

/** Kills a child's whole process group (an nginx master's worker survives the master alone). */
export function killGroup(c: ChildProcess, sig: NodeJS.Signals): void {
  try {
    if (c.pid) process.kill(-c.pid, sig);
  } catch {
    // already gone
  }
}

process.on('exit', () => {
  for (const c of children) killGroup(c, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));

/**
 * CPU pinning (--pin, with 2+ CPUs and taskset): the proxy under test on CPU 1, the load generators
 * and the backend on CPU 0. Off by default: on a machine shared with other work, a pinned process
 * cannot move to an idle CPU and every wake-up waits (measured: raw Node proxy p50 at one
 * connection 5.1 ms pinned vs 0.6 ms unpinned).
 */
export const CPUS = Number(spawnSync('nproc', { encoding: 'utf8' }).stdout) || 1;
export const PIN = process.argv.includes('--pin') && have('taskset') && CPUS >= 2;
export type Cpu = 'target' | 'load';
export const pinned = (cpu: Cpu, cmd: string, argv: string[]): [string, string[]] =>
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
export function tree(pid: number): number[] {
  const out = [pid];
  const r = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' });
  for (const c of r.stdout.split(/\s+/).filter(Boolean)) out.push(...tree(Number(c)));
  return out;
}

const TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);

/** utime + stime of the processes, in seconds. */
export function cpuSeconds(pids: number[]): number {
  let sum = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      sum += Number(fields[11]) + Number(fields[12]);
    } catch {
      // exited
    }
  }
  return sum / TICKS;
}

export function rssMb(pids: number[]): number {
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

/**
 * Every port the benchmark scripts listen on is BASE + a fixed offset (loopback only), BASE from
 * OUTRIGGER_BENCH_PORT_BASE (default 18080), so two runs on one machine can be kept apart.
 */
const BASE = Number(process.env.OUTRIGGER_BENCH_PORT_BASE ?? 18080);
export const benchPort = (offset: number): number => BASE + offset;

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
