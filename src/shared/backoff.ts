import type { Random } from './clock.ts';

export interface BackoffPolicy {
  initialMs: number;
  maxMs: number;
  factor: number;
}

/** client-go's reflector uses 800 ms doubling to 30 s; we follow it. */
export const defaultBackoff: BackoffPolicy = { initialMs: 800, maxMs: 30_000, factor: 2 };

/**
 * Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And Jitter"):
 * the delay is uniform in [0, min(cap, initial * factor^attempt)], which spreads a fleet of sidecars
 * that all lost the API server at the same moment instead of letting them reconnect in lockstep.
 */
export class Backoff {
  #attempt = 0;
  readonly #policy: BackoffPolicy;
  readonly #random: Random;

  constructor(policy: BackoffPolicy, random: Random) {
    this.#policy = policy;
    this.#random = random;
  }

  next(): number {
    const ceiling = Math.min(
      this.#policy.maxMs,
      this.#policy.initialMs * this.#policy.factor ** this.#attempt,
    );
    this.#attempt = Math.min(this.#attempt + 1, 64);
    return Math.floor(this.#random() * ceiling);
  }

  reset(): void {
    this.#attempt = 0;
  }

  get attempt(): number {
    return this.#attempt;
  }
}
