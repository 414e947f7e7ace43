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
export function testBinaries(): Record<'etcd' | 'kube-apiserver' | 'kubectl' | 'jaeger', string> {
  const r = spawnSync('bash', [path.join(repoRoot, 'scripts/test-cluster'), 'paths'], { encoding: 'utf8' });
  const out: Record<'etcd' | 'kube-apiserver' | 'kubectl' | 'jaeger', string> = {
    etcd: '',
    'kube-apiserver': '',
    kubectl: '',
    jaeger: '',
  };
  for (const line of r.stdout.split('\n')) {
    const [k, v] = line.split('=');
    if (k && v && k in out) out[k as keyof typeof out] = v;
  }
  return out;
}

export function clusterBinariesBuilt(): boolean {
  const b = testBinaries();
  return [b.etcd, b['kube-apiserver']].every((p) => p !== undefined && existsSync(p));
}
