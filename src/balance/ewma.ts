/**
 * Peak-EWMA latency, as Linkerd's balancer uses it (Tower's PeakEwma): a slower response raises the
 * estimate at once (the peak), faster ones pull it down with an exponential decay, and the estimate
 * also decays while an endpoint is idle so it is tried again. cost = estimate * (pending + 1).
 */
export class PeakEwma {
  #rttMs: number;
  #updatedAt: number;
  readonly #decayMs: number;
  pending = 0;

  constructor(now: number, defaultRttMs: number, decayMs: number) {
    this.#rttMs = defaultRttMs;
    this.#updatedAt = now;
    this.#decayMs = decayMs;
  }

  observe(now: number, rttMs: number): void {
    if (rttMs > this.#rttMs) {
      this.#rttMs = rttMs;
    } else {
      const w = Math.exp(-Math.max(0, now - this.#updatedAt) / this.#decayMs);
      this.#rttMs = this.#rttMs * w + rttMs * (1 - w);
    }
    this.#updatedAt = Math.max(this.#updatedAt, now);
  }

  estimate(now: number): number {
    const w = Math.exp(-Math.max(0, now - this.#updatedAt) / this.#decayMs);
    return this.#rttMs * w;
  }

  cost(now: number): number {
    return this.estimate(now) * (this.pending + 1);
  }
}
