import { readFile } from 'node:fs/promises';
import { Backoff, type BackoffPolicy } from '../shared/backoff.ts';
import type { Clock, Random, Timer } from '../shared/clock.ts';
import { errorMessage, OutriggerError } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { loadCredentials, saveCredentials, type Credentials } from './identity-store.ts';
import type { CertificateRequester } from './issuer-client.ts';
import { formatSpiffeId, idFromServiceAccountUser } from './spiffe.ts';
import { createCsr, generateP256 } from './x509.ts';

export interface WorkloadIdentityOptions {
  trustDomain: string;
  /** The projected token of audience outrigger-identity; re-read before every request. */
  tokenFile: string;
  /** The pod's in-memory emptyDir. */
  storeDir: string;
  request: CertificateRequester;
  clock: Clock;
  random: Random;
  log: Logger;
  /** Fraction of the lifetime after which to renew (Linkerd: 0.7). */
  renewFraction?: number;
  /** Up to this fraction of that point earlier, at random, so replicas do not renew in lockstep. */
  jitter?: number;
  backoff?: BackoffPolicy;
}

export interface IdentityStatus {
  spiffeId: string;
  ready: boolean;
  /** Where the current certificate came from: the issuer, or the store after a restart. */
  source: 'issuer' | 'stored' | 'none';
  notBefore?: string;
  notAfter?: string;
  renewAt?: string;
  renewals: number;
  renewalFailures: number;
  lastError?: string;
}

const RETRY: BackoffPolicy = { initialMs: 2_000, maxMs: 60_000, factor: 2 };
const MIN_RETRY_MS = 1_000;

/**
 * The sidecar's mesh identity. A new P-256 key and CSR per request, signed by `outrigger identity`
 * against the pod's projected token; renewed at ~70 % of the lifetime; on failure the current
 * certificate stays in use and the request is retried with backoff until it expires. Kept in the
 * store so a restart during an issuer or API outage starts with the identity it had.
 */
export class WorkloadIdentity {
  readonly #o: WorkloadIdentityOptions;
  readonly #log: Logger;
  readonly #backoff: Backoff;
  #spiffeId = '';
  #current: Credentials | undefined;
  #source: IdentityStatus['source'] = 'none';
  #renewAt: number | undefined;
  #timer: Timer | undefined;
  #renewals = 0;
  #failures = 0;
  #lastError: string | undefined;
  #listeners: ((c: Credentials) => void)[] = [];
  #closed = false;

  constructor(opts: WorkloadIdentityOptions) {
    this.#o = opts;
    this.#log = opts.log.child({ component: 'mesh-identity' });
    this.#backoff = new Backoff(opts.backoff ?? RETRY, opts.random);
  }

  /**
   * Reads the token (which names the service account), then the store; asks the issuer at once
   * when there is nothing valid stored. Resolves after that first attempt, certified or not.
   */
  async start(): Promise<void> {
    this.#spiffeId = formatSpiffeId(await this.#identityFromToken());
    const stored = await loadCredentials(this.#o.storeDir, this.#spiffeId, this.#o.clock.now());
    if (stored.credentials) {
      this.#install(stored.credentials, 'stored');
      this.#log.info('using the stored identity', {
        spiffeId: this.#spiffeId,
        notAfter: new Date(stored.credentials.notAfter).toISOString(),
      });
      return;
    }
    this.#log.info('requesting an identity', { spiffeId: this.#spiffeId, stored: stored.reason });
    await this.#renew();
  }

  get spiffeId(): string {
    return this.#spiffeId;
  }

  /** The credentials to present, if any are valid now. */
  current(): Credentials | undefined {
    const c = this.#current;
    return c && c.notAfter > this.#o.clock.now() ? c : undefined;
  }

  onChange(fn: (c: Credentials) => void): void {
    this.#listeners.push(fn);
  }

  status(): IdentityStatus {
    const c = this.#current;
    const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
    return {
      spiffeId: this.#spiffeId,
      ready: this.current() !== undefined,
      source: this.#source,
      ...(c ? { notBefore: iso(c.notBefore), notAfter: iso(c.notAfter) } : {}),
      ...(this.#renewAt !== undefined ? { renewAt: iso(this.#renewAt) } : {}),
      renewals: this.#renewals,
      renewalFailures: this.#failures,
      ...(this.#lastError ? { lastError: this.#lastError } : {}),
    };
  }

  metrics(): Record<string, { help: string; value: number }> {
    return {
      outrigger_identity_ready: {
        help: 'Whether the sidecar holds a valid mesh certificate',
        value: this.current() ? 1 : 0,
      },
      outrigger_identity_expiry_timestamp_seconds: {
        help: 'When the mesh certificate expires (Unix seconds; 0 without one)',
        value: (this.#current?.notAfter ?? 0) / 1000,
      },
      outrigger_identity_renewals_total: {
        help: 'Mesh certificates obtained from the issuer',
        value: this.#renewals,
      },
      outrigger_identity_renewal_failures_total: {
        help: 'Failed requests to the identity issuer',
        value: this.#failures,
      },
    };
  }

  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
  }

  async #identityFromToken() {
    const token = await this.#token();
    const sub = jwtSubject(token);
    const id = sub ? idFromServiceAccountUser(this.#o.trustDomain, sub) : undefined;
    if (!id)
      throw new OutriggerError(
        'identity_unavailable',
        `the identity token ${this.#o.tokenFile} is not a service-account token (subject ${JSON.stringify(sub)})`,
      );
    return id;
  }

  async #token(): Promise<string> {
    try {
      const t = (await readFile(this.#o.tokenFile, 'utf8')).trim();
      if (t) return t;
      throw new Error('the file is empty');
    } catch (e) {
      throw new OutriggerError(
        'identity_unavailable',
        `cannot read the identity token ${this.#o.tokenFile}: ${errorMessage(e)}`,
      );
    }
  }

  async #renew(): Promise<void> {
    if (this.#closed) return;
    try {
      const keys = await generateP256();
      const csr = await createCsr(keys, this.#spiffeId);
      const issued = await this.#o.request(await this.#token(), csr);
      if (issued.spiffeId !== this.#spiffeId)
        throw new Error(`issuer answered for ${issued.spiffeId}, not ${this.#spiffeId}`);
      const creds: Credentials = {
        spiffeId: issued.spiffeId,
        key: keys.privateKey,
        certificate: issued.certificate,
        chain: issued.chain,
        notBefore: issued.notBefore,
        notAfter: issued.notAfter,
      };
      if (this.#closed) return;
      this.#renewals++;
      this.#lastError = undefined;
      this.#backoff.reset();
      this.#install(creds, 'issuer');
      this.#log.info('identity certificate obtained', {
        spiffeId: this.#spiffeId,
        notAfter: new Date(creds.notAfter).toISOString(),
        renewAt: new Date(this.#renewAt ?? 0).toISOString(),
      });
      await saveCredentials(this.#o.storeDir, creds).catch((e: unknown) =>
        this.#log.warn('cannot store the identity; a restart will ask the issuer again', {
          reason: errorMessage(e),
        }),
      );
    } catch (e) {
      if (this.#closed) return;
      this.#failures++;
      this.#lastError = errorMessage(e);
      const delay = this.#retryDelay();
      this.#log.warn('identity request failed; keeping the current certificate', {
        reason: this.#lastError,
        retryInMs: delay,
        notAfter: this.#current ? new Date(this.#current.notAfter).toISOString() : undefined,
      });
      this.#schedule(this.#o.clock.now() + delay);
    }
  }

  #install(c: Credentials, source: IdentityStatus['source']): void {
    this.#current = c;
    this.#source = source;
    const fraction = (this.#o.renewFraction ?? 0.7) * (1 - (this.#o.jitter ?? 0.1) * this.#o.random());
    this.#schedule(c.notBefore + (c.notAfter - c.notBefore) * fraction);
    for (const fn of this.#listeners) fn(c);
  }

  /** Backoff, but never so long that the current certificate runs out before the next try. */
  #retryDelay(): number {
    const left = this.#current ? this.#current.notAfter - this.#o.clock.now() : Infinity;
    return Math.max(MIN_RETRY_MS, Math.min(this.#backoff.next(), left / 3));
  }

  #schedule(at: number): void {
    this.#timer?.cancel();
    this.#renewAt = at;
    this.#timer = this.#o.clock.setTimer(Math.max(0, at - this.#o.clock.now()), () => void this.#renew());
  }
}

/** The JWT's sub claim, unverified: the issuer verifies the token; this only names the CSR. */
function jwtSubject(token: string): string | undefined {
  try {
    const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
      sub?: unknown;
    };
    return typeof claims.sub === 'string' ? claims.sub : undefined;
  } catch {
    return undefined;
  }
}
