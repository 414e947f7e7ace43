import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerProcessMetrics } from './metrics.ts';

/** Read at scrape time: the CA's and the roots' expiry, the distribution's coverage. */
export interface IssuerGauges {
  /** notAfter of the signing CA certificate, ms since the epoch. */
  caNotAfter: number;
  /** The earliest notAfter among the trust-bundle roots, ms since the epoch. */
  bundleNotAfter: number;
  /** Namespaces the trust bundle is kept in, and how many hold the current roots (undefined: off). */
  distribution?: { namespaces: number; current: number };
}

/**
 * `outrigger identity`'s Prometheus metrics, in the sidecar's style (outrigger_ prefix, process
 * metrics, build info), under outrigger_issuer_ so they never mix with the sidecars'
 * outrigger_identity_* series. Refusal reasons and TokenReview error codes are closed sets.
 */
export class IssuerMetrics {
  readonly registry = new Registry();
  readonly #issued: Counter;
  readonly #refusals: Counter<'reason'>;
  readonly #review: Histogram;
  readonly #reviewErrors: Counter<'code'>;
  readonly #writes: Counter<'op' | 'result'>;
  readonly #syncFailures: Counter;

  constructor(gauges: () => IssuerGauges, opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    registerProcessMetrics(this.registry, opts.defaultMetrics !== false);
    this.#issued = new Counter({
      name: 'outrigger_issuer_certificates_issued_total',
      help: 'Workload certificates signed',
      registers,
    });
    this.#refusals = new Counter({
      name: 'outrigger_issuer_refusals_total',
      help: 'Certificate requests refused, by reason (bad_audience, token_expired, not_bound_to_pod, csr_identity_mismatch, ...)',
      labelNames: ['reason'],
      registers,
    });
    this.#review = new Histogram({
      name: 'outrigger_issuer_token_review_duration_seconds',
      help: 'TokenReview calls to the API server, answered or failed',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
      registers,
    });
    this.#reviewErrors = new Counter({
      name: 'outrigger_issuer_token_review_errors_total',
      help: 'TokenReview calls that got no answer, by code (kube_unavailable, kube_forbidden, ...)',
      labelNames: ['code'],
      registers,
    });
    this.#writes = new Counter({
      name: 'outrigger_issuer_trust_bundle_writes_total',
      help: 'Trust-bundle ConfigMap writes, by op (create, update) and result (ok, conflict, error)',
      labelNames: ['op', 'result'],
      registers,
    });
    this.#syncFailures = new Counter({
      name: 'outrigger_issuer_trust_bundle_sync_failures_total',
      help: 'Distribution rounds that could not read namespaces or ConfigMaps (nothing written)',
      registers,
    });
    const gauge = (name: string, help: string, read: (g: IssuerGauges) => number | undefined): void => {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const v = read(gauges());
          if (v !== undefined) this.set(v);
        },
      });
    };
    gauge(
      'outrigger_issuer_ca_expiry_timestamp_seconds',
      'When the signing CA certificate expires (Unix time)',
      (g) => g.caNotAfter / 1000,
    );
    gauge(
      'outrigger_issuer_trust_bundle_expiry_timestamp_seconds',
      'When the first root of the trust bundle expires (Unix time)',
      (g) => g.bundleNotAfter / 1000,
    );
    gauge(
      'outrigger_issuer_trust_bundle_namespaces',
      'Namespaces the trust-bundle ConfigMap is kept in',
      (g) => g.distribution?.namespaces,
    );
    gauge(
      'outrigger_issuer_trust_bundle_current_namespaces',
      'Namespaces whose trust-bundle ConfigMap holds the current roots',
      (g) => g.distribution?.current,
    );
  }

  issued(): void {
    this.#issued.inc();
  }

  refused(reason: string): void {
    this.#refusals.inc({ reason });
  }

  reviewed(seconds: number, errorCode: string | undefined): void {
    this.#review.observe(seconds);
    if (errorCode !== undefined) this.#reviewErrors.inc({ code: errorCode });
  }

  synced(ok: boolean): void {
    if (!ok) this.#syncFailures.inc();
  }

  wrote(op: string, result: string): void {
    this.#writes.inc({ op, result });
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
