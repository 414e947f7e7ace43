import { LRUCache } from 'lru-cache';
import type { Clock, Random } from '../shared/clock.ts';
import { PeakEwma } from './ewma.ts';
import { defaultOutlierPolicy, OutlierState, type OutlierPolicy } from './outlier.ts';
import { defaultRetryBudget, RetryBudget, type RetryBudgetPolicy } from './retry-budget.ts';

/**
 * Per-request load balancing over one Service's endpoints. Endpoints are opaque ids
 * ("address:port"): balancing knows nothing of Kubernetes (docs/design.md, data flow).
 */
export type Algorithm = 'p2c-ewma' | 'round-robin';

/** P2C: two costs closer than this fraction of the larger are a tie. */
const TIE_BAND = 0.1;

/** How an attempt ended, as far as endpoint health is concerned. */
export type Outcome = 'success' | 'connect_failure' | 'server_error' | 'timeout' | 'cancelled';

/** One attempt's feedback: called once with how the attempt ended. */
export interface AttemptFeedback {
  (outcome: Outcome): void;
  /**
   * The request is now on a ready connection. Its latency counts from here, as Linkerd's balancer
   * measures only requests on ready connections: an endpoint whose first call paid for the
   * connection (or a TLS handshake on a busy machine) is not shunned while its peak decays.
   */
  ready?: () => void;
}

export interface BalancerOptions {
  algorithm: Algorithm;
  clock: Clock;
  random: Random;
  /** Linkerd's defaults: 30 ms initial estimate, 10 s decay. */
  defaultRttMs?: number;
  decayMs?: number;
  /** A failed attempt counts as at least this slow, so fast failures do not attract traffic. */
  failurePenaltyMs?: number;
  outlier?: OutlierPolicy;
  /** Below this fraction of non-ejected endpoints, ejection is ignored (Envoy's panic threshold). */
  panicThreshold?: number;
  retryBudget?: RetryBudgetPolicy;
  onEject?: (service: string, endpoint: string) => void;
}

interface EndpointState {
  ewma: PeakEwma;
  outlier: OutlierState;
}

export interface EndpointView {
  id: string;
  ewmaMs: number;
  pending: number;
  ejected: boolean;
  ejections: number;
}

export class ServiceBalancer {
  readonly service: string;
  readonly budget: RetryBudget;
  readonly #o: Required<Omit<BalancerOptions, 'onEject'>> & Pick<BalancerOptions, 'onEject'>;
  readonly #states = new Map<string, EndpointState>();
  #cursor = 0;

  constructor(service: string, o: BalancerOptions) {
    this.service = service;
    this.#o = {
      defaultRttMs: 30,
      decayMs: 10_000,
      failurePenaltyMs: 1_000,
      outlier: defaultOutlierPolicy,
      panicThreshold: 0.5,
      retryBudget: defaultRetryBudget,
      ...o,
    };
    this.budget = new RetryBudget(o.clock, this.#o.retryBudget);
  }

  /**
   * Picks one of ids, never one in exclude (endpoints already tried by this request). Ejected
   * endpoints are skipped unless too few are left (panic), so ejection alone never leaves a Service
   * with nothing to try.
   */
  pick(ids: readonly string[], exclude?: ReadonlySet<string>): string | undefined {
    const now = this.#o.clock.now();
    const candidates = exclude && exclude.size > 0 ? ids.filter((id) => !exclude.has(id)) : ids;
    if (candidates.length === 0) return undefined;
    let ejected = 0;
    for (const id of ids) if (this.#peekEjected(id, now)) ejected++;
    // Nothing ejected (the common case): every candidate is healthy, and no array is built.
    let pool = candidates;
    if (ejected > 0) {
      const healthy = candidates.filter((id) => !this.#peekEjected(id, now));
      const panic = healthy.length === 0 || ids.length - ejected < ids.length * this.#o.panicThreshold;
      if (!panic) pool = healthy;
    }
    if (pool.length === 1) return pool[0];
    return this.#o.algorithm === 'round-robin' ? this.#roundRobin(pool) : this.#p2c(pool, now);
  }

  /** True when every one of ids is currently ejected (then the proxy falls back to the original destination). */
  allEjected(ids: readonly string[]): boolean {
    const now = this.#o.clock.now();
    return ids.length > 0 && ids.every((id) => this.#peekEjected(id, now));
  }

  isEjected(id: string): boolean {
    return this.#peekEjected(id, this.#o.clock.now());
  }

  /** Marks an attempt in flight; call the returned function exactly once when it ends. */
  start(id: string): AttemptFeedback {
    const state = this.#state(id);
    let startedAt = this.#o.clock.now();
    let ready = false;
    state.ewma.pending++;
    let done = false;
    const end = (outcome: Outcome): void => {
      if (done) return;
      done = true;
      state.ewma.pending--;
      const now = this.#o.clock.now();
      const rtt = now - startedAt;
      if (outcome === 'cancelled') return;
      if (outcome === 'success') {
        state.ewma.observe(now, rtt);
        state.outlier.success();
        return;
      }
      state.ewma.observe(now, Math.max(rtt, this.#o.failurePenaltyMs));
      if (outcome === 'timeout') return;
      if (state.outlier.failure(now, this.#o.outlier)) this.#o.onEject?.(this.service, id);
    };
    return Object.assign(end, {
      ready: () => {
        if (ready || done) return;
        ready = true;
        startedAt = this.#o.clock.now();
      },
    });
  }

  /** Forgets endpoints that are no longer in the Service. */
  retain(ids: readonly string[]): void {
    if (this.#states.size <= ids.length) return;
    const keep = new Set(ids);
    for (const id of this.#states.keys()) if (!keep.has(id)) this.#states.delete(id);
  }

  view(): EndpointView[] {
    const now = this.#o.clock.now();
    return [...this.#states].map(([id, s]) => ({
      id,
      ewmaMs: Math.round(s.ewma.estimate(now) * 100) / 100,
      pending: s.ewma.pending,
      ejected: this.#peekEjected(id, now),
      ejections: s.outlier.ejections,
    }));
  }

  #peekEjected(id: string, now: number): boolean {
    return this.#states.get(id)?.outlier.ejected(now) ?? false;
  }

  #state(id: string): EndpointState {
    let s = this.#states.get(id);
    if (!s) {
      s = {
        ewma: new PeakEwma(this.#o.clock.now(), this.#o.defaultRttMs, this.#o.decayMs),
        outlier: new OutlierState(),
      };
      this.#states.set(id, s);
    }
    return s;
  }

  #roundRobin(pool: readonly string[]): string | undefined {
    const id = pool[this.#cursor % pool.length];
    this.#cursor = (this.#cursor + 1) % 1_000_000_007;
    return id;
  }

  /**
   * Power of two choices: two distinct random endpoints, the cheaper one wins. Costs within
   * TIE_BAND of each other are a tie, won by the first of the pair (itself a uniform pick): equally
   * fast endpoints then share calls evenly, where a strict comparison would let the noise of their
   * estimates pile one-at-a-time calls onto one of them.
   */
  #p2c(pool: readonly string[], now: number): string | undefined {
    const n = pool.length;
    const i = Math.min(n - 1, Math.floor(this.#o.random() * n));
    let j = Math.min(n - 2, Math.floor(this.#o.random() * (n - 1)));
    if (j >= i) j++;
    const a = pool[i] as string;
    const b = pool[j] as string;
    const ca = this.#state(a).ewma.cost(now);
    const cb = this.#state(b).ewma.cost(now);
    return ca - cb > TIE_BAND * ca ? b : a;
  }
}

/** One ServiceBalancer per Service, bounded so that a flood of destinations cannot grow memory. */
export class Balancers {
  readonly #o: BalancerOptions;
  readonly #byService: LRUCache<string, ServiceBalancer>;

  constructor(o: BalancerOptions, max = 2_000) {
    this.#o = o;
    this.#byService = new LRUCache({ max });
  }

  for(service: string): ServiceBalancer {
    let b = this.#byService.get(service);
    if (!b) {
      b = new ServiceBalancer(service, this.#o);
      this.#byService.set(service, b);
    }
    return b;
  }

  /**
   * The balancer of one request or stream routed to service over ids. It counts toward the
   * Service's retry budget (retries are allowed up to a ratio of these), and endpoints no longer
   * in ids are forgotten.
   */
  routed(service: string, ids: readonly string[]): ServiceBalancer {
    const b = this.for(service);
    b.budget.deposit();
    b.retain(ids);
    return b;
  }

  view(): Record<string, EndpointView[]> {
    const out: Record<string, EndpointView[]> = {};
    for (const [k, b] of this.#byService.entries()) out[k] = b.view();
    return out;
  }
}
