// Test helpers for the injection webhook: certificates from the project's own script, and a
// Secret-volume directory written and rotated the way kubelet's AtomicWriter does it.
import { spawnSync } from 'node:child_process';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { repoRoot } from './tools.ts';

export const opensslAvailable = (): boolean => spawnSync('openssl', ['version']).status === 0;

export interface WebhookCerts {
  dir: string;
  caPem: string;
  certPem: string;
  keyPem: string;
  /** The caBundle value for a webhook configuration. */
  caBundle: string;
}

/** Runs scripts/gen-webhook-certs; a second call on the same dir re-issues under the same CA. */
export function makeWebhookCerts(dir: string, extra: string[] = ['--ip', '127.0.0.1']): WebhookCerts {
  const r = spawnSync('bash', [path.join(repoRoot, 'scripts/gen-webhook-certs'), '--out', dir, ...extra], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`gen-webhook-certs failed: ${r.stderr}`);
  const read = (f: string): string => readFileSync(path.join(dir, f), 'utf8');
  return {
    dir,
    caPem: read('ca.crt'),
    certPem: read('tls.crt'),
    keyPem: read('tls.key'),
    caBundle: read('ca-bundle.b64').trim(),
  };
}

let seq = 0;

function writeVersion(dir: string, files: Record<string, string>): string {
  const version = `..${Date.now()}_${process.pid}_${seq++}`;
  mkdirSync(path.join(dir, version));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, version, name), text);
  return version;
}

/** A Secret volume: files in ..VERSION, `..data` links to it, each name links through ..data. */
export function writeSecretDir(dir: string, files: Record<string, string>): void {
  mkdirSync(dir, { recursive: true });
  symlinkSync(writeVersion(dir, files), path.join(dir, '..data'));
  for (const name of Object.keys(files)) symlinkSync(path.join('..data', name), path.join(dir, name));
}

/** kubelet's update: new version dir, ..data_tmp -> it, atomic rename over ..data, old one removed. */
export function rotateSecretDir(dir: string, files: Record<string, string>): void {
  const old = readdirSync(dir).filter((n) => n.startsWith('..') && n !== '..data');
  symlinkSync(writeVersion(dir, files), path.join(dir, '..data_tmp'));
  renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  for (const o of old) rmSync(path.join(dir, o), { recursive: true, force: true });
}
