/**
 * Passive outlier detection per endpoint: consecutive connect failures or 5xx eject it for a time
 * that doubles with each ejection (base..max). After an ejection ends the endpoint is on probation:
 * one more failure ejects it again at once. Successes clear the streak.
 */
export interface OutlierPolicy {
  consecutiveFailures: number;
  baseEjectionMs: number;
  maxEjectionMs: number;
}

export const defaultOutlierPolicy: OutlierPolicy = {
  consecutiveFailures: 5,
  baseEjectionMs: 10_000,
  maxEjectionMs: 300_000,
};

export class OutlierState {
  #streak = 0;
  #ejections = 0;
  #ejectedUntil = 0;
  #probation = false;

  ejected(now: number): boolean {
    if (this.#ejectedUntil === 0) return false;
    if (now < this.#ejectedUntil) return true;
    this.#ejectedUntil = 0;
    this.#probation = true;
    return false;
  }

  /** Returns true when this failure ejected the endpoint. */
  failure(now: number, policy: OutlierPolicy): boolean {
    if (this.ejected(now)) return false;
    this.#streak++;
    if (!this.#probation && this.#streak < policy.consecutiveFailures) return false;
    const ms = Math.min(policy.maxEjectionMs, policy.baseEjectionMs * 2 ** Math.min(this.#ejections, 30));
    this.#ejections++;
    this.#ejectedUntil = now + ms;
    this.#streak = 0;
    this.#probation = false;
    return true;
  }

  success(): void {
    this.#streak = 0;
    if (this.#probation) {
      this.#probation = false;
      this.#ejections = Math.max(0, this.#ejections - 1);
    }
  }

  get ejections(): number {
    return this.#ejections;
  }
}
