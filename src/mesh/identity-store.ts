import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { splitPemCertificates } from './ca.ts';
import { privateKeyPem } from './x509.ts';

/** What a sidecar proves itself with: its key, its certificate and the chain to send with it. */
export interface Credentials {
  spiffeId: string;
  key: KeyObject;
  certificate: string;
  chain: string[];
  notBefore: number;
  notAfter: number;
}

const FILE = 'identity.pem';

/**
 * Keeps the credentials in a directory, meant to be the pod's in-memory emptyDir: it survives a
 * sidecar restart (so a sidecar restarted while the issuer is down keeps its identity until the
 * certificate expires) but never the pod, and never touches a disk. One file holding key,
 * certificate and chain, replaced by rename, so a crash mid-write leaves the old pair whole.
 */
export async function saveCredentials(dir: string, c: Credentials): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = join(dir, `.${FILE}.tmp`);
  await writeFile(tmp, [privateKeyPem(c.key), c.certificate, ...c.chain].join('\n'), { mode: 0o600 });
  await rename(tmp, join(dir, FILE));
}

/**
 * The stored credentials if they are whole, for this identity, and not expired at `now`; otherwise
 * undefined (a missing file is the normal first start). The reason is returned for the log.
 */
export async function loadCredentials(
  dir: string,
  spiffeId: string,
  now: number,
): Promise<{ credentials?: Credentials; reason?: string }> {
  let text: string;
  try {
    text = await readFile(join(dir, FILE), 'utf8');
  } catch {
    return { reason: 'no stored identity' };
  }
  try {
    const [certificate, ...chain] = splitPemCertificates(text);
    if (!certificate) return { reason: 'stored identity has no certificate' };
    const key = createPrivateKey(text);
    const cert = new X509Certificate(certificate);
    if (!cert.checkPrivateKey(key)) return { reason: 'stored key does not match the certificate' };
    if (cert.subjectAltName !== `URI:${spiffeId}`)
      return { reason: `stored certificate is for ${cert.subjectAltName}` };
    const notAfter = Date.parse(cert.validTo);
    if (notAfter <= now) return { reason: `stored certificate expired at ${cert.validTo}` };
    return {
      credentials: { spiffeId, key, certificate, chain, notBefore: Date.parse(cert.validFrom), notAfter },
    };
  } catch (e) {
    return { reason: `stored identity unreadable: ${(e as Error).message}` };
  }
}
