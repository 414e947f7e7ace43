import { Backoff, defaultBackoff, type BackoffPolicy } from '../shared/backoff.ts';
import type { Clock, Random, Timer } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { isGone, KubeError, type KubeApi, type WatchEvent } from '../kube/api.ts';
import type { Recovery } from './recovery.ts';

/** Where a reflector delivers what it learns. The sink owns the data; the reflector owns the loop. */
export interface ReflectorSink {
  /**
   * A complete, successful list: the only place where an absent object means deleted. `selectors`
   * are the ones the list was made with (they change with reselect()).
   */
  replace(items: unknown[], selectors: Record<string, string>): void;
  event(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: unknown): void;
  /** A list succeeded or a watch is established: the data is current. */
  synced(): void;
  /** A request failed. Nothing is removed; the data is now stale. */
  failed(reason: string): void;
}

export interface ReflectorOptions {
  name: string;
  api: KubeApi;
  path: string;
  /** Selectors (labelSelector, fieldSelector) applied to both the list and the watch. */
  selectors: Record<string, string>;
  sink: ReflectorSink;
  clock: Clock;
  random: Random;
  logger: Logger;
  backoff?: BackoffPolicy;
  /** Server-side watch timeout, drawn uniformly in [min, max) seconds (client-go: 5-10 min). */
  watchTimeoutS?: [number, number];
  /** A list that has not finished after this is abandoned (a stalled relist must not hang us). */
  listTimeoutMs?: number;
  /** After this much silence on a watch the client gives up on it (half-open TCP) and re-watches. */
  inactivityMs?: number;
  recovery?: Recovery;
  /**
   * Spread of retries after a recovery signal: every reconnect after an outage, a resumed watch as
   * much as a relist, waits a random time in [0, recoverySpreadMs), so a fleet that lost the API
   * server together does not come back in one burst.
   */
  recoverySpreadMs?: number;
  /**
   * A 410 right after a failure streak means the API server lost our resourceVersion (it
   * restarted: its watch cache starts at the present). Every sidecar of the cluster relists at that
   * moment, so the relist waits a random time in [0, relistSpreadMs) to spread that wave, unless
   * this reconnect already waited out the recovery spread; the data stays served, marked stale,
   * meanwhile.
   */
  relistSpreadMs?: number;
}

class Inactive extends Error {
  constructor() {
    super('watch inactive');
    this.name = 'Inactive';
  }
}

/** The selectors changed: the watch ends on purpose and is re-established with the new ones. */
class Reselected extends Error {
  constructor() {
    super('selectors changed');
    this.name = 'Reselected';
  }
}

/**
 * List + watch that never stops (as client-go's reflector):
 * the first list at RV "0" (served from the watch cache), then a watch from the list's RV with
 * bookmarks and a randomized timeout. A watch that ends is resumed from the last RV without a
 * relist; a 410 relists at the last RV (NotOlderThan), and a 410 on that relist does a consistent
 * read (RV ""). Every other error, 401 and 403 included, is transient: the sink is told (stale),
 * nothing is removed, and the loop retries after a full-jitter backoff.
 */
export class Reflector {
  readonly #o: ReflectorOptions;
  readonly #backoff: Backoff;
  readonly #log: Logger;
  #stop = new AbortController();
  #done: Promise<void> | undefined;
  #watching = false;
  #failing = false;
  #selectors: Record<string, string>;
  #relistWanted = false;
  /** This reconnect already waited a random spread: a 410 that follows relists at once. */
  #spread = false;
  #currentWatch: AbortController | undefined;

  constructor(opts: ReflectorOptions) {
    this.#o = opts;
    this.#backoff = new Backoff(opts.backoff ?? defaultBackoff, opts.random);
    this.#log = opts.logger.child({ reflector: opts.name });
    this.#selectors = opts.selectors;
  }

  /**
   * New selectors for the next request. The open watch ends and is re-established from the last
   * resourceVersion (no relist) when the new selection is narrower; `relist` when it is wider,
   * since a watch from an RV carries only later changes, never what newly selected objects are.
   * That relist asks for the last RV or newer (served from the API server's watch cache).
   */
  reselect(selectors: Record<string, string>, opts: { relist: boolean }): void {
    this.#selectors = selectors;
    if (opts.relist) this.#relistWanted = true;
    this.#currentWatch?.abort(new Reselected());
  }

  get watching(): boolean {
    return this.#watching;
  }

  start(): void {
    this.#done ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#stop.abort(new Error('reflector stopped'));
    await this.#done;
  }

  async #run(): Promise<void> {
    let rv: string | undefined;
    let listRV = '0';
    let gones = 0;
    while (!this.#stop.signal.aborted) {
      if (this.#relistWanted) {
        this.#relistWanted = false;
        if (rv !== undefined) [listRV, rv] = [rv, undefined];
      }
      try {
        if (rv === undefined) {
          rv = await this.#list(listRV);
          this.#ok();
          // Widened while the list was in flight: that list lacks the new objects, so list again.
          if (this.#relistWanted) continue;
        }
        const started = this.#o.clock.now();
        const { opened, events, reselected } = await this.#watch(rv, (next) => (rv = next));
        gones = 0;
        if (reselected) continue;
        // A healthy watch ends by its timeout and is resumed at once. One that ends at once with
        // nothing in it gets a backoff pause, so a server closing every watch is no hot loop.
        if (opened && (events > 0 || this.#o.clock.now() - started >= 1_000)) this.#backoff.reset();
        else await this.#pause(this.#backoff.next(), false);
      } catch (e) {
        if (this.#stop.signal.aborted) break;
        if (isGone(e)) {
          // Watch 410: relist at the last RV (PR #86430: no thundering herd of quorum reads).
          // List 410: that RV is compacted too, so a consistent read.
          listRV = rv === undefined ? '' : rv;
          rv = undefined;
          // Repeated 410s relist too, but after a backoff pause, never in a hot loop.
          if (++gones <= 2) {
            this.#log.info('resource version expired; relisting', { resourceVersion: listRV || 'latest' });
            const spread = this.#o.relistSpreadMs ?? 0;
            if (gones === 1 && this.#failing && !this.#spread && spread > 0) {
              this.#spread = true;
              await this.#pause(Math.floor(this.#o.random() * spread), false);
            }
            continue;
          }
        }
        this.#fail(e);
        await this.#retryPause(e);
      }
    }
    this.#watching = false;
  }

  async #list(rv: string): Promise<string> {
    const selectors = this.#selectors;
    const query: Record<string, string> = { ...selectors, resourceVersion: rv };
    if (rv !== '') query.resourceVersionMatch = 'NotOlderThan';
    const res = await this.#withTimeout(this.#o.listTimeoutMs ?? 30_000, (signal) =>
      this.#o.api.list(this.#o.path, query, signal),
    );
    this.#o.sink.replace(res.items, selectors);
    return res.resourceVersion;
  }

  async #watch(
    rv: string,
    setRV: (rv: string) => void,
  ): Promise<{ opened: boolean; events: number; reselected?: boolean }> {
    const [min, max] = this.#o.watchTimeoutS ?? [300, 600];
    const timeoutS = Math.floor(min + this.#o.random() * (max - min));
    const query = {
      ...this.#selectors,
      resourceVersion: rv,
      allowWatchBookmarks: 'true',
      timeoutSeconds: String(timeoutS),
    };
    const inactivityMs = this.#o.inactivityMs ?? (timeoutS + 30) * 1000;
    const { ac, onStop } = this.#linked();
    let timer: Timer | undefined;
    const arm = (): void => {
      timer?.cancel();
      timer = this.#o.clock.setTimer(inactivityMs, () => ac.abort(new Inactive()));
    };
    let opened = false;
    let events = 0;
    arm();
    this.#currentWatch = ac;
    try {
      await this.#o.api.watch(
        this.#o.path,
        query,
        {
          onOpen: () => {
            opened = true;
            this.#watching = true;
            this.#ok();
            arm();
          },
          onEvent: (ev) => {
            arm();
            events++;
            this.#apply(ev, setRV);
          },
        },
        ac.signal,
      );
    } catch (e) {
      if (ac.signal.reason instanceof Inactive) {
        this.#log.debug('watch silent for too long; re-watching', { inactivityMs });
        return { opened, events };
      }
      if (ac.signal.reason instanceof Reselected) return { opened, events, reselected: true };
      throw e;
    } finally {
      this.#currentWatch = undefined;
      this.#watching = false;
      timer?.cancel();
      this.#stop.signal.removeEventListener('abort', onStop);
    }
    return { opened, events };
  }

  #apply(ev: WatchEvent, setRV: (rv: string) => void): void {
    const meta = (ev.object as { metadata?: { resourceVersion?: string } } | null)?.metadata;
    if (ev.type === 'ERROR') {
      const st = ev.object as { code?: number; message?: string } | null;
      const code = st?.code ?? 0;
      throw new KubeError(
        code === 410 ? 'kube_gone' : 'kube_unavailable',
        `watch error: ${st?.message ?? code}`,
        code,
      );
    }
    if (ev.type === 'ADDED' || ev.type === 'MODIFIED' || ev.type === 'DELETED')
      this.#o.sink.event(ev.type, ev.object);
    if (meta?.resourceVersion) setRV(meta.resourceVersion);
  }

  /**
   * After a failure: the backoff (full jitter), cut short when the API recovers; after a 429 or
   * 503 with Retry-After, at least that long plus up to as much again of jitter, and not cut
   * short: the server asked this client to wait, and a fleet that all got "1 s" must not return
   * in the same second.
   */
  async #retryPause(e: unknown): Promise<void> {
    const backoff = this.#backoff.next();
    const after = e instanceof KubeError ? e.retryAfterMs : undefined;
    if (after === undefined) return this.#pause(backoff, true);
    await this.#pause(Math.max(backoff, after + Math.floor(this.#o.random() * after)), false);
  }

  #ok(): void {
    this.#spread = false;
    if (this.#failing) {
      this.#failing = false;
      this.#log.info('API reachable again');
      this.#o.recovery?.notify();
    }
    this.#o.sink.synced();
  }

  #fail(e: unknown): void {
    const reason = errorMessage(e);
    if (!this.#failing) this.#log.warn('list/watch failed; keeping last-known-good and retrying', { reason });
    this.#failing = true;
    this.#o.sink.failed(reason);
  }

  /**
   * An AbortController that follows stop(), aborted at once if stop() already happened: a stop
   * that lands between two steps of the loop must not let the next request run forever.
   */
  #linked(): { ac: AbortController; onStop: () => void } {
    const ac = new AbortController();
    const onStop = (): void => ac.abort(this.#stop.signal.reason);
    if (this.#stop.signal.aborted) onStop();
    else this.#stop.signal.addEventListener('abort', onStop, { once: true });
    return { ac, onStop };
  }

  /** Sleeps ms, or less if the API recovers meanwhile (then a short random spread). Never throws. */
  async #pause(ms: number, wakeOnRecovery: boolean): Promise<void> {
    const { ac, onStop } = this.#linked();
    const waiter = wakeOnRecovery ? this.#o.recovery?.wait() : undefined;
    const spread = (): Promise<void> => {
      this.#spread = true;
      return this.#o.clock.sleep(
        Math.floor(this.#o.random() * (this.#o.recoverySpreadMs ?? 1_000)),
        ac.signal,
      );
    };
    try {
      await Promise.race([
        this.#o.clock.sleep(ms, ac.signal),
        ...(waiter ? [waiter.promise.then(spread)] : []),
      ]);
    } catch {
      // stopped
    } finally {
      waiter?.cancel();
      ac.abort();
      this.#stop.signal.removeEventListener('abort', onStop);
    }
  }

  async #withTimeout<T>(ms: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const { ac, onStop } = this.#linked();
    const timer = this.#o.clock.setTimer(ms, () =>
      ac.abort(new KubeError('kube_unavailable', `${this.#o.path}: list timed out after ${ms} ms`)),
    );
    try {
      return await fn(ac.signal);
    } catch (e) {
      if (ac.signal.aborted && ac.signal.reason instanceof KubeError) throw ac.signal.reason;
      throw e;
    } finally {
      timer.cancel();
      this.#stop.signal.removeEventListener('abort', onStop);
    }
  }
}
