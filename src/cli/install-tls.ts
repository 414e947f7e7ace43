import { X509Certificate, createPrivateKey } from 'node:crypto';
import { isIP } from 'node:net';
import { errorMessage } from '../shared/errors.ts';
import type { SecretData } from './install-state.ts';
import { issueServing, makeCa } from './pki.ts';

/**
 * The webhook's certificate for one `install` run: the installed one, kept byte for byte with its
 * caBundle, unless it cannot serve (expiring, wrong names, broken) or a rotation is asked for.
 * Keeping it is what makes a re-run (an upgrade, or a fix `check` advises) change nothing the
 * API server verifies against.
 */
const DAY_MS = 86_400_000;
/** An installed certificate or CA this close to its end is replaced on the next run. */
export const RENEW_WITHIN_MS = 30 * DAY_MS;

export interface TlsPlan {
  /** The Secret's data, base64. */
  data: SecretData;
  caBundle: string;
  validTo: string;
  /** Why a new certificate was issued; undefined when the installed one is kept. */
  issued?: string;
}

export interface TlsInput {
  existing?: SecretData;
  /** The installed caBundle (base64). */
  caBundle?: string;
  /** The names the webhook is called by. */
  sans: string[];
  rotate: boolean;
  days: number;
  now: number;
}

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const unb64 = (s: string): string => Buffer.from(s, 'base64').toString('utf8');

interface Parsed {
  cert: X509Certificate;
  ca: X509Certificate;
}

/** The installed pair, or why it cannot serve the webhook as it is called now. */
function usable(existing: SecretData, sans: string[], now: number): Parsed | string {
  let parsed: Parsed;
  try {
    if (!existing['ca.crt']) return 'the installed Secret has no ca.crt';
    parsed = {
      cert: new X509Certificate(unb64(existing['tls.crt'])),
      ca: new X509Certificate(unb64(existing['ca.crt'])),
    };
    if (!parsed.cert.checkPrivateKey(createPrivateKey(unb64(existing['tls.key']))))
      return 'the installed key does not match its certificate';
  } catch (e) {
    return `the installed certificate does not parse (${errorMessage(e)})`;
  }
  const { cert, ca } = parsed;
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey))
    return 'the installed certificate is not signed by the ca.crt beside it';
  const missing = sans.filter((n) => (isIP(n) ? !cert.checkIP(n) : !cert.checkHost(n)));
  if (missing.length > 0) return `the installed certificate is not valid for ${missing.join(', ')}`;
  for (const [what, c] of [
    ['certificate', cert],
    ['CA', ca],
  ] as const)
    if (Date.parse(c.validTo) - now < RENEW_WITHIN_MS)
      return `the installed ${what} expires on ${c.validTo} (within ${RENEW_WITHIN_MS / DAY_MS} days)`;
  return parsed;
}

const certsOf = (bundle: string): X509Certificate[] => {
  try {
    return (unb64(bundle).match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? []).map(
      (p) => new X509Certificate(p),
    );
  } catch {
    return [];
  }
};

/**
 * The installed caBundle when it trusts the kept certificate (minus CAs that have expired, such as
 * one kept for a rotation's overlap), else the kept certificate's CA: that repairs a caBundle that
 * drifted from the Secret without touching the certificate.
 */
function keptBundle(installed: string | undefined, kept: Parsed, secretCa: string, now: number): string {
  const cas = installed ? certsOf(installed) : [];
  if (!cas.some((ca) => kept.cert.checkIssued(ca) && kept.cert.verify(ca.publicKey))) return secretCa;
  const live = cas.filter((ca) => Date.parse(ca.validTo) > now);
  return live.length === cas.length && installed ? installed : b64(live.map((c) => c.toString()).join(''));
}

export function planWebhookTls(o: TlsInput): TlsPlan {
  if (o.rotate) return { ...issue(o), issued: '--rotate-certificate' };
  if (!o.existing) return { ...issue(o), issued: 'no certificate is installed' };
  const kept = usable(o.existing, o.sans, o.now);
  if (typeof kept === 'string') return { ...issue(o), issued: kept };
  return {
    data: o.existing,
    caBundle: keptBundle(o.caBundle, kept, o.existing['ca.crt'] ?? '', o.now),
    validTo: kept.cert.validTo,
  };
}

/** A new CA (3x the serving lifetime) and serving certificate; the previous CA stays trusted. */
function issue(o: TlsInput): Omit<TlsPlan, 'issued'> {
  // A minute of slack for clocks that run behind this one.
  const from = new Date(o.now - 60_000);
  const ca = makeCa('outrigger-webhook-ca', {
    notBefore: from,
    notAfter: new Date(o.now + 3 * o.days * DAY_MS),
  });
  const serving = issueServing(ca, o.sans, { notBefore: from, notAfter: new Date(o.now + o.days * DAY_MS) });
  return {
    data: { 'tls.crt': b64(serving.certPem), 'tls.key': b64(serving.keyPem), 'ca.crt': b64(ca.certPem) },
    caBundle: b64(ca.certPem + previousCa(o.existing, o.now)),
    validTo: serving.cert.validTo,
  };
}

/**
 * The CA the webhook serves under until it reloads the new Secret (up to a minute, the kubelet's
 * Secret refresh): kept in the caBundle so pod creation never fails in between.
 */
function previousCa(existing: SecretData | undefined, now: number): string {
  const prev = existing?.['ca.crt'] ? certsOf(existing['ca.crt'])[0] : undefined;
  return prev && Date.parse(prev.validTo) > now ? prev.toString() : '';
}
