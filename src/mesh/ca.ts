import { readFile } from 'node:fs/promises';
import { X509Certificate } from 'node:crypto';
import { errorMessage, OutriggerError } from '../shared/errors.ts';
import { loadPrivateKey, type Signer } from './x509.ts';

/**
 * The issuer's signing CA, from PEM files (a mounted Secret). The certificate file holds the
 * signing certificate first, then any intermediates; the trust bundle (the roots sidecars trust)
 * is its own file, and defaults to the certificate file when the CA is a self-signed root.
 */
export interface IssuingCa {
  signer: Signer;
  /** Certificates a leaf is sent with: the signing certificate and its intermediates, no root. */
  chain: string[];
  trustBundle: string;
  notAfter: number;
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

export const splitPemCertificates = (text: string): string[] => text.match(PEM_CERT) ?? [];

/** When the first certificate of a PEM bundle expires (ms since the epoch; Infinity for none). */
export function earliestExpiry(pem: string): number {
  return Math.min(...splitPemCertificates(pem).map((c) => Date.parse(new X509Certificate(c).validTo)));
}

const bad = (msg: string): OutriggerError => new OutriggerError('config_invalid', msg);

export async function loadCa(
  files: { certFile: string; keyFile: string; trustBundleFile?: string },
  now: number,
): Promise<IssuingCa> {
  const read = async (flag: string, path: string): Promise<string> => {
    try {
      return await readFile(path, 'utf8');
    } catch (e) {
      // Unreadable is a runtime failure (exit 1), like every command's missing file; bad content is
      // invalid input (exit 2).
      throw new OutriggerError('source_invalid', `${flag} ${path}: ${errorMessage(e)}`);
    }
  };
  // Read side by side, awaited in flag order: with two files missing, the error names the first
  // flag, not whichever read happened to fail first.
  const cert = read('--ca-cert', files.certFile);
  const key_ = read('--ca-key', files.keyFile);
  const bundle = files.trustBundleFile ? read('--trust-bundle', files.trustBundleFile) : undefined;
  for (const p of [cert, key_, bundle]) p?.catch(() => {}); // reported below, in order
  const certText = await cert;
  const keyText = await key_;
  const bundleText = await bundle;
  const pems = splitPemCertificates(certText);
  const first = pems[0];
  if (!first) throw bad(`--ca-cert ${files.certFile}: no PEM certificate in the file`);
  const certs = pems.map((p) => new X509Certificate(p));
  const signing = certs[0] as X509Certificate;
  if (!signing.ca)
    throw bad(`--ca-cert ${files.certFile}: the first certificate is not a CA (basicConstraints cA=false)`);
  let key;
  try {
    key = loadPrivateKey(keyText);
  } catch (e) {
    throw bad(`--ca-key ${files.keyFile}: ${errorMessage(e)}`);
  }
  if (!signing.checkPrivateKey(key))
    throw bad(`--ca-key ${files.keyFile} does not match --ca-cert ${files.certFile}`);
  const notAfter = Date.parse(signing.validTo);
  if (notAfter <= now) throw bad(`--ca-cert ${files.certFile} expired at ${signing.validTo}`);
  const selfSigned = (c: X509Certificate): boolean => c.checkIssued(c) && c.verify(c.publicKey);
  const trustBundle = bundleText ?? certText;
  if (!bundleText && !selfSigned(signing))
    throw bad(
      `--ca-cert ${files.certFile} is an intermediate: pass --trust-bundle with the root it chains to`,
    );
  return {
    signer: { certPem: first, key },
    chain: pems.filter((_, i) => !selfSigned(certs[i] as X509Certificate)),
    trustBundle,
    notAfter,
  };
}
