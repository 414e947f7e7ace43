import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A self-signed P-256 certificate for the given DNS names (first one is the CN), made by openssl. */
export function selfSigned(...names: string[]): { cert: string; key: string } {
  return selfSignedFor(
    names[0] ?? 'default',
    names.map((n) => `DNS:${n}`),
  );
}

/** A self-signed P-256 certificate with this CN and subjectAltName entries (DNS:..., IP:...). */
export function selfSignedFor(cn: string, sans: string[]): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), 'gw-cert-'));
  try {
    const r = spawnSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-days',
        '2',
        '-subj',
        `/CN=${cn}`,
        '-addext',
        `subjectAltName=${sans.join(',')}`,
        '-keyout',
        join(dir, 'k.pem'),
        '-out',
        join(dir, 'c.pem'),
      ],
      { encoding: 'utf8' },
    );
    if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`);
    return { cert: readFileSync(join(dir, 'c.pem'), 'utf8'), key: readFileSync(join(dir, 'k.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A kubernetes.io/tls Secret as the API returns it. */
export function tlsSecretObject(
  namespace: string,
  name: string,
  pem: { cert: string; key: string },
  rv?: string,
) {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'kubernetes.io/tls',
    metadata: { namespace, name, ...(rv ? { resourceVersion: rv } : {}) },
    data: {
      'tls.crt': Buffer.from(pem.cert).toString('base64'),
      'tls.key': Buffer.from(pem.key).toString('base64'),
    },
  };
}
