import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'node:test';

export const repoRoot = path.resolve(import.meta.dirname, '../..');
export const inCI = process.env.CI === 'true';

/**
 * Tests that need a tool call this first. Locally a missing tool skips the test with the reason;
 * under CI=true it fails the test: CI must never report a skipped check as passed.
 */
export function requireTool(t: TestContext, ok: boolean, what: string, hint: string): boolean {
  if (ok) return true;
  const msg = `${what} is not available: ${hint}`;
  if (inCI) throw new Error(`CI=true and ${msg}`);
  t.skip(msg);
  return false;
}

/** Paths of the Go-built test binaries, from `scripts/test-cluster paths`. */
type TestBinary =
  | 'etcd'
  | 'kube-apiserver'
  | 'kubectl'
  | 'kube-controller-manager'
  | 'jaeger'
  | 'kubelet'
  | 'kube-proxy'
  | 'kube-scheduler'
  | 'coredns'
  | 'gateway-api-crds';

export function testBinaries(): Record<TestBinary, string> {
  const r = spawnSync('bash', [path.join(repoRoot, 'scripts/test-cluster'), 'paths'], { encoding: 'utf8' });
  const out: Record<TestBinary, string> = {
    etcd: '',
    'kube-apiserver': '',
    kubectl: '',
    'kube-controller-manager': '',
    jaeger: '',
    kubelet: '',
    'kube-proxy': '',
    'kube-scheduler': '',
    coredns: '',
    'gateway-api-crds': '',
  };
  for (const line of r.stdout.split('\n')) {
    const [k, v] = line.split('=');
    if (k && v && k in out) out[k as keyof typeof out] = v;
  }
  return out;
}

export function clusterBinariesBuilt(opts: { controllerManager?: boolean; node?: boolean } = {}): boolean {
  const b = testBinaries();
  const needed = [
    b.etcd,
    b['kube-apiserver'],
    ...(opts.controllerManager || opts.node ? [b['kube-controller-manager']] : []),
    ...(opts.node ? [b.kubelet, b['kube-proxy'], b['kube-scheduler'], b.kubectl] : []),
  ];
  return needed.every((p) => p !== undefined && existsSync(p));
}
