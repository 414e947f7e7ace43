import { LRUCache } from 'lru-cache';
import type { Clock } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import type { KubeApi } from '../kube/api.ts';
import type { Resolution, ServiceKey } from './types.ts';
import { keyString } from './types.ts';

export interface ExistenceOptions {
  api: KubeApi;
  clock: Clock;
  logger: Logger;
  /** How long "no such Service" is believed without asking again. */
  absentMs?: number;
  /** How long a failed check is remembered, so an outage does not cost one request per lookup. */
  failedMs?: number;
  /** A check that has not answered by then counts as failed. */
  timeoutMs?: number;
  /** Bound on remembered answers (each is a key and a few numbers). */
  max?: number;
}

type Answer = { until: number; res: Resolution & { kind: 'absent' | 'unknown' } };

/**
 * Does a Service exist in a namespace nobody watches? One LIST of that one name (served from the
 * API server's watch cache), so a lookup of a random name (`example.com` is Service `example` in
 * namespace `com`) opens no watch. Negative answers are kept for a while: a long-lived watch per
 * looked-up namespace would cost the API server far more across a fleet of sidecars.
 */
export class ExistenceChecks {
  readonly #o: ExistenceOptions;
  readonly #answers: LRUCache<string, Answer>;
  readonly #inflight = new Map<string, Promise<boolean>>();
  readonly #stop = new AbortController();

  constructor(o: ExistenceOptions) {
    this.#o = o;
    this.#answers = new LRUCache({ max: o.max ?? 10_000 });
  }

  /** A remembered negative answer that has not expired yet. */
  cached(key: string): Answer['res'] | undefined {
    const a = this.#answers.get(key);
    if (a && a.until > this.#o.clock.now()) return a.res;
    if (a) this.#answers.delete(key);
    return undefined;
  }

  /** A Service the watch saw deleted (or listed as missing) and that is no longer watched. */
  rememberAbsent(key: string): void {
    this.#remember(key, { kind: 'absent' }, this.#o.absentMs ?? 60_000);
  }

  /** Resolves true when it exists; false when it does not or the check failed (both remembered). */
  check(key: ServiceKey): Promise<boolean> {
    const k = keyString(key);
    const running = this.#inflight.get(k);
    if (running) return running;
    const p = this.#ask(key).finally(() => this.#inflight.delete(k));
    this.#inflight.set(k, p);
    return p;
  }

  close(): void {
    this.#stop.abort(new Error('discovery closed'));
  }

  async #ask(key: ServiceKey): Promise<boolean> {
    const k = keyString(key);
    const ac = new AbortController();
    const ms = this.#o.timeoutMs ?? 10_000;
    const timer = this.#o.clock.setTimer(ms, () => ac.abort(new Error(`no answer in ${ms} ms`)));
    const onStop = (): void => ac.abort(this.#stop.signal.reason);
    this.#stop.signal.addEventListener('abort', onStop, { once: true });
    try {
      const path = `/api/v1/namespaces/${encodeURIComponent(key.namespace)}/services`;
      const query = { fieldSelector: `metadata.name=${key.name}`, resourceVersion: '0' };
      const { items } = await this.#o.api.list(path, query, ac.signal);
      if (items.length > 0) return true;
      this.rememberAbsent(k);
      return false;
    } catch (e) {
      const reason = `could not check whether the Service exists: ${errorMessage(e)}`;
      this.#o.logger.debug('existence check failed', { service: k, reason });
      this.#remember(k, { kind: 'unknown', reason }, this.#o.failedMs ?? 5_000);
      return false;
    } finally {
      timer.cancel();
      this.#stop.signal.removeEventListener('abort', onStop);
    }
  }

  #remember(key: string, res: Answer['res'], ms: number): void {
    this.#answers.set(key, { until: this.#o.clock.now() + ms, res });
  }
}
