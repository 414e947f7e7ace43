import { LRUCache } from 'lru-cache';
import type { Clock } from '../shared/clock.ts';

/**
 * sessionAffinity: ClientIP. Behind a sidecar the client IP is the local pod on egress, so this is
 * per-pod stickiness with kube-proxy's semantics: the binding expires after timeoutSeconds without
 * use, and a binding to an endpoint that is gone or ejected is replaced.
 */
export class AffinityTable {
  readonly #clock: Clock;
  readonly #entries: LRUCache<string, { endpoint: string; lastUsed: number }>;

  constructor(clock: Clock, maxEntries = 10_000) {
    this.#clock = clock;
    this.#entries = new LRUCache({ max: maxEntries });
  }

  /** The endpoint id bound to (service, client) if the binding is still live and usable. */
  lookup(
    service: string,
    client: string,
    timeoutSeconds: number,
    usable: (id: string) => boolean,
  ): string | undefined {
    const k = `${service}|${client}`;
    const e = this.#entries.get(k);
    if (!e) return undefined;
    const now = this.#clock.now();
    if (now - e.lastUsed > timeoutSeconds * 1000 || !usable(e.endpoint)) {
      this.#entries.delete(k);
      return undefined;
    }
    e.lastUsed = now;
    return e.endpoint;
  }

  bind(service: string, client: string, endpoint: string): void {
    this.#entries.set(`${service}|${client}`, { endpoint, lastUsed: this.#clock.now() });
  }
}
