import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './tools.ts';

/** The CLI as users run it from a checkout: `node src/main.ts ...` (the bin runs the same code compiled). */
export const mainTs = path.join(repoRoot, 'src/main.ts');

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `outrigger ARGS` as a child process to the end (killed after timeoutMs) with an env that
 * holds no OUTRIGGER_* or KUBECONFIG variable of the caller unless given.
 */
export async function runCli(
  args: string[],
  opts: { env?: Record<string, string>; input?: string; timeoutMs?: number; cwd?: string } = {},
): Promise<CliResult> {
  const child = startCli(args, opts);
  if (opts.input !== undefined) child.stdin?.end(opts.input);
  else child.stdin?.end();
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
  const [status] = (await once(child, 'close')) as [number | null];
  clearTimeout(timer);
  return { status, stdout: child.out(), stderr: child.err() };
}

export type CliProcess = ChildProcess & { out(): string; err(): string };

/** Starts `outrigger ARGS` and keeps collecting its output; the caller stops it. */
export function startCli(
  args: string[],
  opts: { env?: Record<string, string>; cwd?: string } = {},
): CliProcess {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith('OUTRIGGER_') && k !== 'KUBECONFIG') env[k] = v;
  const child = spawn(process.execPath, [mainTs, ...args], {
    env: { ...env, HOME: env.HOME ?? '/nonexistent', ...opts.env },
    cwd: opts.cwd ?? repoRoot,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return Object.assign(child, { out: () => out, err: () => err });
}

/** Waits until the child's stdout or stderr matches re (or it exits, or timeoutMs passes). */
export async function waitForOutput(
  child: CliProcess,
  re: RegExp,
  timeoutMs = 20_000,
): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const m = re.exec(child.out()) ?? re.exec(child.err());
    if (m) return m;
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(
    `no output matching ${re} (exit ${child.exitCode});\nstdout: ${child.out()}\nstderr: ${child.err()}`,
  );
}

/** Stops a started CLI with a signal and waits for its exit status. */
export async function stopCli(child: CliProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const closed = once(child, 'close');
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const [status] = (await closed) as [number | null];
  clearTimeout(timer);
  return status;
}

/**
 * `outrigger proxy --capture explicit` on free loopback ports with EXTRA flags (the source), stopped
 * when the test ends; resolves once it logged its start.
 */
export async function startSidecar(
  t: { after(fn: () => unknown): void },
  extra: string[],
  env: Record<string, string> = {},
): Promise<{ egress: number; ingress: number; admin: number; proxy: CliProcess }> {
  const { freePort } = await import('./jaeger.ts');
  // A free port can be taken by a parallel test before the sidecar binds it: try again then.
  for (let attempt = 1; ; attempt++) {
    const ports = new Set<number>();
    while (ports.size < 3) ports.add(await freePort());
    const [egress = 0, ingress = 0, admin = 0] = [...ports];
    const proxy = startCli(
      [
        ...['proxy', '--capture', 'explicit', '--trace-sampling', '0', '--drain-duration', '0s'],
        ...[
          '--egress-port',
          String(egress),
          '--ingress-port',
          String(ingress),
          '--admin-port',
          String(admin),
        ],
        ...extra,
      ],
      { env },
    );
    t.after(() => stopCli(proxy));
    try {
      await waitForOutput(proxy, /outrigger proxy started/);
      return { egress, ingress, admin, proxy };
    } catch (e) {
      if (attempt >= 3 || !proxy.err().includes('EADDRINUSE')) throw e;
    }
  }
}

/** A kubeconfig whose API server is a closed loopback port (https://127.0.0.1:1). */
export function closedKubeconfig(dir: string): string {
  const file = path.join(dir, 'closed.kubeconfig');
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`,
  );
  return file;
}

/**
 * `bash -c SCRIPT` as a user types it against a test cluster: KUBECONFIG and $KUBECTL (the
 * cluster's kubectl) set, read when the script runs (the cluster starts after the shell is made).
 */
export function clusterShell(
  kubeconfig: () => string,
  kubectl: () => string,
): (script: string) => SpawnSyncReturns<string> {
  return (script) =>
    spawnSync('bash', ['-c', script], {
      encoding: 'utf8',
      env: { ...process.env, KUBECONFIG: kubeconfig(), KUBECTL: kubectl() },
    });
}
