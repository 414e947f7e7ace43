import type { Clock } from '../shared/clock.ts';
import { errorMessage, OutriggerError } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import type { IssuingCa } from './ca.ts';
import type { IssuedCertificate } from './issuer-client.ts';
import { formatSpiffeId, idFromServiceAccountUser } from './spiffe.ts';
import { parseCsr, signLeaf } from './x509.ts';

/** The TokenReview API as the issuer needs it (implemented in src/discovery/kube/). */
export interface TokenReviewer {
  review(token: string, audiences: readonly string[], signal: AbortSignal): Promise<TokenReviewResult>;
}

export interface TokenReviewResult {
  authenticated: boolean;
  username?: string;
  audiences?: string[];
  extra?: Record<string, string[]>;
  error?: string;
}

export interface IssuerOptions {
  ca: IssuingCa;
  reviewer: TokenReviewer;
  trustDomain: string;
  /** The audience sidecar tokens must be minted for. */
  audience: string;
  ttlMs: number;
  clock: Clock;
  log: Logger;
  /** Refuse tokens that are not bound to a pod (a TokenRequest made by hand, a legacy Secret token). */
  requireBoundPod: boolean;
  reviewTimeoutMs?: number;
}

/** The certificate and what the sidecar needs with it. */
export type Certified = IssuedCertificate;

/** Clock skew between nodes: a certificate is valid a little before it was signed (Linkerd: 20 s). */
const BACKDATE_MS = 20_000;
const POD_NAME = 'authentication.kubernetes.io/pod-name';
const POD_UID = 'authentication.kubernetes.io/pod-uid';

const rejected = (msg: string): OutriggerError => new OutriggerError('identity_token_rejected', msg);

/**
 * One certification: the CSR is checked first (no API call for a malformed request), then the
 * token with TokenReview for our audience only (never retried without one), then the CSR must ask
 * for exactly the identity the token proves. Only the CSR's public key is used: the certificate's
 * names and extensions are ours.
 */
export class Issuer {
  readonly #o: IssuerOptions;

  constructor(opts: IssuerOptions) {
    this.#o = opts;
  }

  async certify(token: string, csrPem: string): Promise<Certified> {
    const o = this.#o;
    const csr = await parseCsr(csrPem);
    const result = await this.#review(token);
    if (!result.authenticated)
      throw rejected(`token not accepted by the API server${result.error ? `: ${result.error}` : ''}`);
    if (!(result.audiences ?? []).includes(o.audience))
      throw rejected(`token is not for audience ${o.audience}`);
    const id = idFromServiceAccountUser(o.trustDomain, result.username ?? '');
    if (!id) throw rejected(`token user ${JSON.stringify(result.username)} is not a service account`);
    const pod = result.extra?.[POD_NAME]?.[0];
    if (o.requireBoundPod && !pod) throw rejected('token is not bound to a pod');
    const want = formatSpiffeId(id);
    if (csr.otherNames > 0 || csr.uris.length !== 1 || csr.uris[0] !== want)
      throw new OutriggerError(
        'identity_forbidden',
        `csr asks for ${JSON.stringify(csr.uris)}${csr.otherNames ? ` and ${csr.otherNames} other names` : ''}; this token may only get ${want}`,
      );
    const now = o.clock.now();
    const notBefore = now - BACKDATE_MS;
    const notAfter = Math.min(now + o.ttlMs, o.ca.notAfter);
    const certificate = await signLeaf(o.ca.signer, {
      publicKey: csr.publicKey,
      uri: want,
      notBefore: new Date(notBefore),
      notAfter: new Date(notAfter),
    });
    o.log.info('certificate issued', {
      spiffeId: want,
      pod,
      podUid: result.extra?.[POD_UID]?.[0],
      notAfter: new Date(notAfter).toISOString(),
    });
    return {
      spiffeId: want,
      certificate,
      chain: o.ca.chain,
      trustBundle: o.ca.trustBundle,
      notBefore,
      notAfter,
    };
  }

  async #review(token: string): Promise<TokenReviewResult> {
    try {
      return await this.#o.reviewer.review(
        token,
        [this.#o.audience],
        AbortSignal.timeout(this.#o.reviewTimeoutMs ?? 10_000),
      );
    } catch (e) {
      this.#o.log.warn('TokenReview failed', { reason: errorMessage(e) });
      throw new OutriggerError(
        'identity_review_unavailable',
        `cannot review the token now: ${errorMessage(e)}`,
        {
          cause: e,
        },
      );
    }
  }
}
