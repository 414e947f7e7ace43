import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { KubeAdmin } from './kube.ts';
import { clusterBinariesBuilt, repoRoot, requireTool } from './tools.ts';

const script = path.join(repoRoot, 'scripts/test-cluster');

export interface TestCluster {
  /** https://127.0.0.1:PORT */
  server: string;
  caPem: string;
  adminToken: string;
  kubeconfigPath: string;
  stateDir: string;
  pkiDir: string;
  admin: KubeAdmin;
  apiserverStop(): Promise<void>;
  apiserverStart(): Promise<void>;
  stop(): Promise<void>;
}

const live = new Set<string>();
// Belt and braces: a test process that exits or is interrupted (the test runner's timeout sends
// SIGTERM) before its after() hooks still leaves no cluster behind.
function downAll(): void {
  for (const dir of live) spawnSync('bash', [script, '--state-dir', dir, 'down'], { stdio: 'ignore' });
  live.clear();
}
process.once('exit', downAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(sig, () => {
    downAll();
    process.exit(128 + (sig === 'SIGINT' ? 2 : sig === 'SIGTERM' ? 15 : 1));
  });
}

function run(stateDir: string, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [script, '--state-dir', stateDir, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve(out.trim())
        : reject(new Error(`test-cluster ${args.join(' ')} exited ${code}:\n${err}`)),
    );
  });
}

export interface ClusterOptions {
  /** Also run kube-controller-manager with the EndpointSlice controllers. */
  controllerManager?: boolean;
  /** API priority and fairness on, as in real clusters (off by default, as in envtest). */
  priorityAndFairness?: boolean;
  /**
   * Also run a real node (kubelet, containerd, kube-proxy, kube-scheduler) in a network namespace;
   * implies the controller manager. Use startNodeCluster (node.ts) rather than this directly.
   */
  node?: boolean;
}

/**
 * Starts a fresh etcd + kube-apiserver in its own state directory and stops it when the test
 * (or suite) that asked for it ends, pass or fail. Returns undefined when the test was skipped
 * because the binaries are not built (never under CI=true: there it fails).
 */
export async function startCluster(
  t?: TestContext,
  opts: ClusterOptions = {},
): Promise<TestCluster | undefined> {
  const built = clusterBinariesBuilt(opts);
  if (t && !requireTool(t, built, 'the test cluster', "run 'scripts/test-cluster build'")) {
    return undefined;
  }
  if (!t && !built) throw new Error("test binaries missing: run 'scripts/test-cluster build'");
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-cluster-'));
  live.add(stateDir);
  const upFlags = [
    ...(opts.controllerManager ? ['--with-controller-manager'] : []),
    ...(opts.node ? ['--with-node'] : []),
    ...(opts.priorityAndFairness ? ['--priority-and-fairness'] : []),
  ];
  const kubeconfigPath = await run(stateDir, 'up', ...upFlags);
  const pkiDir = path.join(stateDir, 'pki');
  const ports = Object.fromEntries(
    readFileSync(path.join(stateDir, 'ports.env'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split('=') as [string, string]),
  );
  const server = `https://127.0.0.1:${ports.API_PORT}`;
  const caPem = readFileSync(path.join(pkiDir, 'ca.crt'), 'utf8');
  const adminToken = readFileSync(path.join(pkiDir, 'admin-token'), 'utf8').trim();
  const cluster: TestCluster = {
    server,
    caPem,
    adminToken,
    kubeconfigPath,
    stateDir,
    pkiDir,
    admin: new KubeAdmin(server, caPem, adminToken),
    apiserverStop: () => run(stateDir, 'apiserver-stop').then(() => undefined),
    apiserverStart: () => run(stateDir, 'apiserver-start').then(() => undefined),
    stop: async () => {
      if (!live.delete(stateDir)) return;
      await run(stateDir, 'down');
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
  return cluster;
}
