import type { Clock } from './clock.ts';
import type { Fields, Logger } from './log.ts';

/**
 * Logs a recurring per-request problem once per key and window instead of once per request: the
 * first occurrence at once, later ones counted and reported as `suppressed` on the next line after
 * the window. A Service with no endpoints under steady traffic would otherwise write a line per
 * request; Envoy and Linkerd likewise keep per-request failures in metrics and access logs, not in
 * the proxy log. Every request is still counted in /metrics.
 */
export class ThrottledLog {
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #windowMs: number;
  readonly #maxKeys: number;
  readonly #keys = new Map<string, { until: number; suppressed: number }>();

  constructor(log: Logger, clock: Clock, windowMs = 60_000, maxKeys = 1_000) {
    this.#log = log;
    this.#clock = clock;
    this.#windowMs = windowMs;
    this.#maxKeys = maxKeys;
  }

  warn(key: string, msg: string, fields: Fields): void {
    const now = this.#clock.now();
    const seen = this.#keys.get(key);
    if (seen && now < seen.until) {
      seen.suppressed++;
      return;
    }
    this.#log.warn(msg, seen?.suppressed ? { ...fields, suppressed: seen.suppressed } : fields);
    this.#keys.delete(key);
    // Bounded: the key seen longest ago goes first (a Map iterates in insertion order).
    if (this.#keys.size >= this.#maxKeys) this.#keys.delete(this.#keys.keys().next().value ?? '');
    this.#keys.set(key, { until: now + this.#windowMs, suppressed: 0 });
  }
}
