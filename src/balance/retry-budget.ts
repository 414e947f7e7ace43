import type { Clock } from '../shared/clock.ts';

/**
 * Linkerd/Finagle-style retry budget: retries may add at most `ratio` of the requests seen in the
 * last `ttlMs`, plus a floor of `minPerSecond` so that low-traffic services can still retry.
 * Counted in one-second buckets on the injected clock.
 */
export interface RetryBudgetPolicy {
  ratio: number;
  minPerSecond: number;
  ttlMs: number;
}

export const defaultRetryBudget: RetryBudgetPolicy = { ratio: 0.2, minPerSecond: 10, ttlMs: 10_000 };

export class RetryBudget {
  readonly #clock: Clock;
  readonly #policy: RetryBudgetPolicy;
  readonly #buckets: { second: number; requests: number; retries: number }[] = [];

  constructor(clock: Clock, policy: RetryBudgetPolicy = defaultRetryBudget) {
    this.#clock = clock;
    this.#policy = policy;
  }

  /** Counts an original request (not a retry). */
  deposit(): void {
    this.#bucket().requests++;
  }

  /** Takes one retry from the budget; false when the budget is spent. */
  tryWithdraw(): boolean {
    const current = this.#bucket();
    let requests = 0;
    let retries = 0;
    for (const b of this.#buckets) {
      requests += b.requests;
      retries += b.retries;
    }
    const allowed = (this.#policy.minPerSecond * this.#policy.ttlMs) / 1000 + this.#policy.ratio * requests;
    if (retries + 1 > allowed) return false;
    current.retries++;
    return true;
  }

  #bucket(): { second: number; requests: number; retries: number } {
    const second = Math.floor(this.#clock.now() / 1000);
    const oldest = second - Math.ceil(this.#policy.ttlMs / 1000) + 1;
    while (this.#buckets.length > 0 && (this.#buckets[0]?.second ?? 0) < oldest) this.#buckets.shift();
    let last = this.#buckets.at(-1);
    if (!last || last.second !== second) {
      last = { second, requests: 0, retries: 0 };
      this.#buckets.push(last);
    }
    return last;
  }
}
