import https from 'node:https';
import type { ErrorCode } from '../shared/errors.ts';
import { errorMessage, OutriggerError } from '../shared/errors.ts';

/** The path sidecars POST their CSR to; the API of `outrigger identity`. */
export const CERTIFY_PATH = '/v1/certificates';

/** A certificate as the issuer returns it, times in ms since the epoch. */
export interface IssuedCertificate {
  spiffeId: string;
  certificate: string;
  chain: string[];
  trustBundle: string;
  notBefore: number;
  notAfter: number;
}

export interface IssuerClientOptions {
  /** https://outrigger-identity.outrigger-system.svc */
  url: URL;
  /** Roots the issuer's serving certificate chains to (the mesh trust bundle). */
  trustBundle: () => string;
  /** TLS server name when the URL's host is not one of the issuer's serving names (an address). */
  servername?: string;
  timeoutMs?: number;
}

/** The sidecar's side of POST /v1/certificates. */
export type CertificateRequester = (token: string, csr: string) => Promise<IssuedCertificate>;

const REFUSALS: ReadonlySet<string> = new Set<ErrorCode>([
  'identity_request_invalid',
  'identity_token_rejected',
  'identity_forbidden',
  'identity_review_unavailable',
]);

export function issuerClient(opts: IssuerClientOptions): CertificateRequester {
  const target = new URL(CERTIFY_PATH, opts.url);
  return (token, csr) =>
    new Promise((resolve, reject) => {
      const payload = JSON.stringify({ csr });
      const req = https.request(
        target,
        {
          method: 'POST',
          ca: opts.trustBundle(),
          ...(opts.servername ? { servername: opts.servername } : {}),
          minVersion: 'TLSv1.3',
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(payload),
            authorization: `Bearer ${token}`,
          },
          signal: AbortSignal.timeout(opts.timeoutMs ?? 15_000),
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size <= 256 * 1024) chunks.push(c);
          });
          res.on('error', (e) => reject(unavailable(e)));
          res.on('end', () => {
            try {
              resolve(answer(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8')));
            } catch (e) {
              reject(e instanceof OutriggerError ? e : unavailable(e));
            }
          });
        },
      );
      req.on('error', (e) => reject(unavailable(e)));
      req.end(payload);
    });
}

const unavailable = (e: unknown): OutriggerError =>
  new OutriggerError('identity_unavailable', `identity issuer unreachable: ${errorMessage(e)}`, { cause: e });

function answer(status: number, text: string): IssuedCertificate {
  const body = JSON.parse(text) as Record<string, unknown>;
  if (status !== 200) {
    const code =
      typeof body.code === 'string' && REFUSALS.has(body.code)
        ? (body.code as ErrorCode)
        : 'identity_unavailable';
    throw new OutriggerError(
      code,
      `identity issuer answered ${status}: ${typeof body.message === 'string' ? body.message : ''}`,
    );
  }
  const { spiffeId, certificate, chain, trustBundle, notBefore, notAfter } = body;
  if (
    typeof spiffeId !== 'string' ||
    typeof certificate !== 'string' ||
    !Array.isArray(chain) ||
    typeof trustBundle !== 'string' ||
    typeof notBefore !== 'string' ||
    typeof notAfter !== 'string'
  )
    throw new Error('identity issuer answer is missing fields');
  return {
    spiffeId,
    certificate,
    chain: chain.filter((c): c is string => typeof c === 'string'),
    trustBundle,
    notBefore: Date.parse(notBefore),
    notAfter: Date.parse(notAfter),
  };
}
