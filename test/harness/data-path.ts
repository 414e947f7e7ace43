// Data-path e2e helpers: one network namespace holds the "pods" of a test (pod IPs in 10.244.0.0/24
// are local to its lo), the sidecar in explicit mode authenticating to the real API server with a
// TokenRequest token, backends on pod IPs, and an app-like load generator. Nothing gets an address
// in the host namespace; the API server reaches the namespace through a Unix-socket bridge.
import type { ChildProcess } from 'node:child_process';
import { after, type TestContext } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startCluster, type TestCluster } from './cluster.ts';
import { sidecarIdentity } from './discovery.ts';
import { bridgeIntoNetns, createNetns, requireNetns, waitForPort, type Bridge, type Netns } from './netns.ts';
import { repoRoot } from './tools.ts';

const node = process.execPath;
const main = path.join(repoRoot, 'src/main.ts');
const backendScript = path.join(repoRoot, 'test/harness/data-path-backend.ts');
const loadScript = path.join(repoRoot, 'test/harness/data-path-load.ts');
export const API_PORT_IN_POD = 16443;

export interface LoadSummary {
  total: number;
  done: number;
  failed: number;
  failures: { url: string; at: number; status: number; error: string; body: string }[];
  servedBy: Record<string, Record<string, number>>;
}

export interface Sidecar {
  process: ChildProcess;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface PodEnv {
  ns: Netns;
  namespace: string;
  snapshot: string;
  startBackend(address: string): Promise<ChildProcess>;
  stopBackend(child: ChildProcess): Promise<void>;
  startSidecar(extra?: string[]): Promise<Sidecar>;
  /** Runs the load generator to completion; resolves with its summary. */
  load(intervalMs: number, durationMs: number, urls: string[]): Promise<LoadSummary>;
  admin(pathname: string): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((r) => child.once('exit', () => r()));
}

function waitForLine(child: ChildProcess, pattern: RegExp, limitMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(
      () => reject(new Error(`no ${String(pattern)} within ${limitMs} ms: ${seen}`)),
      limitMs,
    );
    child.stdout?.on('data', (d: Buffer) => {
      seen += d.toString();
      if (pattern.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before ${String(pattern)}: ${seen}`));
    });
  });
}

export async function podEnv(cluster: TestCluster, namespace: string): Promise<PodEnv> {
  const ns = await createNetns('datapath', { localRanges: ['10.244.0.0/24'] });
  const url = new URL(cluster.server);
  let bridge: Bridge | undefined;
  const identity = await sidecarIdentity(cluster, namespace);
  const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-datapath-'));
  const snapshot = path.join(dir, 'snapshot.pb');
  const children = new Set<ChildProcess>();
  try {
    bridge = await bridgeIntoNetns(ns, { host: url.hostname, port: Number(url.port) }, API_PORT_IN_POD);
  } catch (e) {
    await ns.remove();
    throw e;
  }
  const track = (c: ChildProcess): ChildProcess => {
    children.add(c);
    c.once('exit', () => children.delete(c));
    return c;
  };
  const env: PodEnv = {
    ns,
    namespace,
    snapshot,
    async startBackend(address) {
      const child = track(ns.spawn([node, backendScript, `${address}:8080`]));
      await waitForLine(child, /listening/, 15_000);
      return child;
    },
    async stopBackend(child) {
      child.kill('SIGTERM');
      await exited(child);
    },
    async startSidecar(extra = []) {
      let out = '';
      const child = track(
        ns.spawn(
          [
            node,
            main,
            'proxy',
            '--capture',
            'explicit',
            '--token-dir',
            identity.dir,
            '--snapshot',
            snapshot,
            '--trace-sampling',
            '0',
            '--drain-seconds',
            '1',
            ...extra,
          ],
          {
            env: {
              ...process.env,
              KUBERNETES_SERVICE_HOST: '127.0.0.1',
              KUBERNETES_SERVICE_PORT: String(API_PORT_IN_POD),
              OUTRIGGER_LOG_LEVEL: 'info',
            },
          },
        ),
      );
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
      await waitForPort(ns, '127.0.0.1', 7402, 30_000);
      return {
        process: child,
        output: () => out,
        stop: async (signal = 'SIGTERM') => {
          child.kill(signal);
          await exited(child);
        },
      };
    },
    async load(intervalMs, durationMs, urls) {
      const r = await ns.exec([node, loadScript, '7400', String(intervalMs), String(durationMs), ...urls], {
        timeoutMs: durationMs + 60_000,
      });
      return JSON.parse(r.stdout) as LoadSummary;
    },
    async admin(pathname) {
      const script = `fetch('http://127.0.0.1:7402${pathname}').then(async r => process.stdout.write(JSON.stringify({status:r.status, body: await r.text()})), () => process.stdout.write(JSON.stringify({status:0, body:''})))`;
      const r = await ns.exec([node, '-e', script], { timeoutMs: 15_000 });
      return JSON.parse(r.stdout) as { status: number; body: string };
    },
    async close() {
      for (const c of children) c.kill('SIGKILL');
      await Promise.all([...children].map(exited));
      await bridge?.close();
      await ns.remove();
      identity.cleanup();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return env;
}

/**
 * One cluster for a describe() suite, started by the first test that can run (skips otherwise,
 * fails under CI) and stopped after the suite. Call inside describe().
 */
export function suiteCluster(): (t: TestContext) => Promise<TestCluster | undefined> {
  let cluster: TestCluster | undefined;
  let starting: Promise<TestCluster | undefined> | undefined;
  after(async () => {
    if (cluster) await cluster.stop();
  });
  return async (t) => {
    if (!requireNetns(t)) return undefined;
    starting ??= startCluster(t);
    cluster = await starting;
    return cluster;
  };
}
