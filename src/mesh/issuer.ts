import type { Clock } from '../shared/clock.ts';
import { errorMessage, isOutriggerError, OutriggerError, type ErrorCode } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import type { IssuingCa } from './ca.ts';
import type { IssuedCertificate } from './issuer-client.ts';
import { formatSpiffeId, idFromServiceAccountUser } from './spiffe.ts';
import { parseCsr, signLeaf } from './x509.ts';

/** The TokenReview API as the issuer needs it (implemented in src/kube/). */
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

/**
 * Why the issuer refused a certificate, finer than the error code the sidecar gets (metrics label
 * `reason` of outrigger_issuer_refusals_total; docs/identity.md lists them). Never rename one.
 */
export type RefusalReason =
  | 'request_invalid'
  | 'token_missing'
  | 'token_expired'
  | 'token_not_authenticated'
  | 'bad_audience'
  | 'not_service_account'
  | 'not_bound_to_pod'
  | 'csr_identity_mismatch'
  | 'review_unavailable'
  | 'internal';

/** What the issuer reports to metrics (src/admin/issuer-metrics.ts implements it). */
export interface IssuerObserver {
  issued(): void;
  refused(reason: RefusalReason): void;
  /** One TokenReview call: its duration, and the error code when it failed (no answer at all). */
  reviewed(seconds: number, errorCode: string | undefined): void;
}

/** A refusal with its reason; the code is what the sidecar sees. */
export class IssuerRefusal extends OutriggerError {
  readonly reason: RefusalReason;

  constructor(code: ErrorCode, reason: RefusalReason, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.reason = reason;
  }
}

/** The reason of any error the issuer's request handling raised. */
export function refusalReason(e: unknown): RefusalReason {
  if (e instanceof IssuerRefusal) return e.reason;
  if (isOutriggerError(e, 'identity_request_invalid')) return 'request_invalid';
  if (isOutriggerError(e, 'identity_review_unavailable')) return 'review_unavailable';
  return 'internal';
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
  observer?: IssuerObserver;
}

/** The certificate and what the sidecar needs with it. */
export type Certified = IssuedCertificate;

/** Clock skew between nodes: a certificate is valid a little before it was signed (Linkerd: 20 s). */
const BACKDATE_MS = 20_000;
const POD_NAME = 'authentication.kubernetes.io/pod-name';
const POD_UID = 'authentication.kubernetes.io/pod-uid';

const rejected = (reason: RefusalReason, msg: string): IssuerRefusal =>
  new IssuerRefusal('identity_token_rejected', reason, msg);

/** The API server says why it did not authenticate a token only in free text. */
function unauthenticatedReason(error: string | undefined): RefusalReason {
  if (/expired/i.test(error ?? '')) return 'token_expired';
  if (/audience/i.test(error ?? '')) return 'bad_audience';
  return 'token_not_authenticated';
}

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
      throw rejected(
        unauthenticatedReason(result.error),
        `token not accepted by the API server${result.error ? `: ${result.error}` : ''}`,
      );
    if (!(result.audiences ?? []).includes(o.audience))
      throw rejected('bad_audience', `token is not for audience ${o.audience}`);
    const id = idFromServiceAccountUser(o.trustDomain, result.username ?? '');
    if (!id)
      throw rejected(
        'not_service_account',
        `token user ${JSON.stringify(result.username)} is not a service account`,
      );
    const pod = result.extra?.[POD_NAME]?.[0];
    if (o.requireBoundPod && !pod) throw rejected('not_bound_to_pod', 'token is not bound to a pod');
    const want = formatSpiffeId(id);
    if (csr.otherNames > 0 || csr.uris.length !== 1 || csr.uris[0] !== want)
      throw new IssuerRefusal(
        'identity_forbidden',
        'csr_identity_mismatch',
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
    const { clock, observer } = this.#o;
    const started = clock.now();
    try {
      const result = await this.#o.reviewer.review(
        token,
        [this.#o.audience],
        AbortSignal.timeout(this.#o.reviewTimeoutMs ?? 10_000),
      );
      observer?.reviewed((clock.now() - started) / 1000, undefined);
      return result;
    } catch (e) {
      observer?.reviewed((clock.now() - started) / 1000, reviewErrorCode(e));
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

/** A failed TokenReview call by its kube error code (kube_unavailable, kube_forbidden, ...). */
function reviewErrorCode(e: unknown): string {
  if (isOutriggerError(e)) return e.code;
  return e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError') ? 'timeout' : 'unknown';
}
