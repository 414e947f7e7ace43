import { mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface TokenFiles {
  token: string;
  caPem: string;
  namespace: string;
}

let seq = 0;

function writeVersion(dir: string, files: TokenFiles): string {
  // kubelet's AtomicWriter names each version ..<timestamp>; the sequence keeps names unique in tests.
  const stamp = new Date().toISOString().replace(/[-:]/g, '_').replace('T', '_').replace('Z', '');
  const version = `..${stamp}.${process.pid}${seq++}`;
  mkdirSync(path.join(dir, version), { mode: 0o755 });
  writeFileSync(path.join(dir, version, 'token'), files.token, { mode: 0o600 });
  writeFileSync(path.join(dir, version, 'ca.crt'), files.caPem);
  writeFileSync(path.join(dir, version, 'namespace'), files.namespace);
  return version;
}

/**
 * Writes a projected service-account volume the way kubelet does: the files live in a versioned
 * ..TIMESTAMP directory, `..data` links to it, and each visible name links through ..data.
 */
export function writeTokenDir(dir: string, files: TokenFiles): void {
  mkdirSync(dir, { recursive: true });
  const version = writeVersion(dir, files);
  symlinkSync(version, path.join(dir, '..data'));
  for (const name of ['token', 'ca.crt', 'namespace'])
    symlinkSync(path.join('..data', name), path.join(dir, name));
}

/** Rotates like kubelet: new version dir, ..data_tmp -> it, atomic rename over ..data, old dir removed. */
export function rotateToken(dir: string, files: TokenFiles): void {
  const old = readdirSync(dir).filter((n) => n.startsWith('..') && n !== '..data');
  const version = writeVersion(dir, files);
  symlinkSync(version, path.join(dir, '..data_tmp'));
  renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  for (const o of old) rmSync(path.join(dir, o), { recursive: true, force: true });
}
