import type { KubeApi } from '../kube/api.ts';
import type { Clock, Timer } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';

/**
 * How the gateway writes to the API (Ingresses' addresses, Gateway API conditions, the Gateways'
 * Services): a pass runs after a short quiet time (a relist writes once), a change that arrives
 * during a pass is written by one more pass after it, and a resync re-checks everything, which
 * also retries failed writes. A failure is logged once per object and reason; it never affects
 * routing.
 */
export interface StatusWritesOptions {
  /** For write(); a writer that only calls attempt() needs none. */
  api?: Required<Pick<KubeApi, 'mergePatch'>>;
  clock: Clock;
  logger: Logger;
  /** Names what is written in logs ("Ingress status", "Gateway API status"). */
  what: string;
  /** The log field that names the object (default "object"). */
  keyField?: string;
  debounceMs?: number;
  resyncMs?: number;
}

export abstract class StatusWrites {
  readonly #o: StatusWritesOptions;
  readonly #stop = new AbortController();
  readonly #failing = new Map<string, string>();
  #timer: Timer | undefined;
  #resync: Timer | undefined;
  #running: Promise<number> | undefined;
  #again = false;
  writes = 0;

  /** One pass: writes what differs through write(); resolves with the number written. */
  protected abstract pass(): Promise<number>;

  constructor(o: StatusWritesOptions) {
    this.#o = o;
    this.#armResync();
  }

  protected get stopped(): boolean {
    return this.#stop.signal.aborted;
  }

  /** Something changed: a pass after a short quiet time. */
  schedule(): void {
    if (this.stopped) return;
    this.#timer ??= this.#o.clock.setTimer(this.#o.debounceMs ?? 200, () => {
      this.#timer = undefined;
      void this.sync();
    });
  }

  /** A pass now, or after the running one; resolves with the number the (running) pass wrote. */
  sync(): Promise<number> {
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    this.#running = this.pass().finally(() => {
      this.#running = undefined;
      if (this.#again && !this.stopped) {
        this.#again = false;
        void this.sync();
      }
    });
    return this.#running;
  }

  /** One merge patch; false when it failed (logged once per object and reason). */
  protected async write(path: string, key: string, patch: unknown): Promise<boolean> {
    const api = this.#o.api;
    if (!api) return false;
    return (await this.attempt(key, (signal) => api.mergePatch(path, patch, signal))) !== undefined;
  }

  /** One write of any kind: its result, or undefined when it failed (logged once per object and reason). */
  protected async attempt<T>(
    key: string,
    call: (signal: AbortSignal) => Promise<T>,
  ): Promise<{ value: T } | undefined> {
    if (this.stopped) return undefined;
    try {
      const value = await call(this.#stop.signal);
      this.writes++;
      if (this.#failing.delete(key)) this.#o.logger.info(`${this.#o.what} written again`, this.#named(key));
      return { value };
    } catch (e) {
      const reason = errorMessage(e);
      if (this.#failing.get(key) !== reason)
        this.#o.logger.warn(`${this.#o.what} not written; retrying later`, { ...this.#named(key), reason });
      this.#failing.set(key, reason);
      return undefined;
    }
  }

  #named(key: string): Record<string, string> {
    return { [this.#o.keyField ?? 'object']: key };
  }

  close(): void {
    this.#stop.abort();
    this.#timer?.cancel();
    this.#resync?.cancel();
  }

  #armResync(): void {
    this.#resync = this.#o.clock.setTimer(this.#o.resyncMs ?? 30_000, () => {
      if (this.stopped) return;
      void this.sync();
      this.#armResync();
    });
  }
}
