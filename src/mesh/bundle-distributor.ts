import { Backoff } from '../shared/backoff.ts';
import type { Clock, Random, Timer } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { ThrottledLog } from '../shared/log-throttle.ts';

/** A ConfigMap of the distributed name, as listed (implemented in src/kube/config-maps.ts). */
export interface BundleMap {
  namespace: string;
  labels: Record<string, string>;
  data: Record<string, string>;
}

/** The API calls the distribution makes, and no others (see manifests/identity/rbac.yaml). */
export interface BundleMapsApi {
  namespaces(labelSelector: string, signal: AbortSignal): Promise<string[]>;
  named(name: string, signal: AbortSignal): Promise<BundleMap[]>;
  /** 'conflict' when the object appeared meanwhile (another replica): checked again next round. */
  create(namespace: string, configMap: object, signal: AbortSignal): Promise<'ok' | 'conflict'>;
  mergePatch(path: string, patch: unknown, signal: AbortSignal): Promise<void>;
  /** Calls onChange on every namespace event; resolves when the server ends the watch. */
  watchNamespaces(labelSelector: string, onChange: () => void, signal: AbortSignal): Promise<void>;
}

export interface BundleObserver {
  /** A round ended: whether its reads succeeded (a failed read writes nothing). */
  synced(ok: boolean): void;
  wrote(op: 'create' | 'update', result: 'ok' | 'conflict' | 'error'): void;
}

export interface DistributorOptions {
  api: BundleMapsApi;
  /** The roots to distribute, read anew each round (a rotated CA Secret is picked up). */
  bundle: () => string;
  /** Namespaces that get the ConfigMap: the injector's opt-in label. */
  namespaceSelector: string;
  name: string;
  key: string;
  resyncMs: number;
  clock: Clock;
  random: Random;
  log: Logger;
  /** Releases the API client once the distribution has stopped. */
  onClose?: () => void;
}

/** Marks the ConfigMaps the issuer keeps, so it keeps them current after a namespace opts out. */
export const MANAGED_BY = 'app.kubernetes.io/managed-by';
export const MANAGER = 'outrigger-identity';

/** /debug/trust-bundle: namespaces covered, how many hold the current roots, the last problem. */
export interface DistributionView {
  namespaces: number;
  current: number;
  lastSync?: string;
  lastError?: string;
}

/**
 * Keeps the trust-bundle ConfigMap in every namespace that opted into injection, as istiod keeps
 * istio-ca-root-cert: created where missing, rewritten where its roots differ from the issuer's,
 * and never deleted. A round reads everything first and writes only then; a failed read writes
 * nothing. Rounds run every resyncMs, at once when a namespace event arrives (a watch), and when
 * the bundle changes (kick()). Several replicas may run it: every write is idempotent.
 */
export class BundleDistributor {
  readonly #o: DistributorOptions;
  readonly #stop = new AbortController();
  readonly #problems: ThrottledLog;
  #dirty = false;
  #wake: (() => void) | undefined;
  #view: DistributionView = { namespaces: 0, current: 0 };
  #lastError: string | undefined;
  #observer: BundleObserver | undefined;

  constructor(o: DistributorOptions) {
    this.#o = o;
    this.#problems = new ThrottledLog(o.log, o.clock);
  }

  start(): void {
    void this.#rounds();
    void this.#watch();
  }

  /** Runs a round as soon as the current one (if any) ends. */
  kick(): void {
    this.#dirty = true;
    this.#wake?.();
  }

  observe(observer: BundleObserver): void {
    this.#observer = observer;
  }

  view(): DistributionView {
    return { ...this.#view, ...(this.#lastError ? { lastError: this.#lastError } : {}) };
  }

  close(): void {
    this.#stop.abort();
    this.#wake?.();
    this.#o.onClose?.();
  }

  /** One round; true when every read and write succeeded. */
  async sync(): Promise<boolean> {
    const { api, name, key } = this.#o;
    const observer = this.#observer;
    const signal = this.#stop.signal;
    const pem = this.#o.bundle();
    let namespaces: string[];
    let existing: BundleMap[];
    try {
      [namespaces, existing] = await Promise.all([
        api.namespaces(this.#o.namespaceSelector, signal),
        api.named(name, signal),
      ]);
    } catch (e) {
      this.#failed('read', e);
      observer?.synced(false);
      return false;
    }
    const found = new Map(existing.map((m) => [m.namespace, m]));
    const targets = new Set(namespaces);
    for (const m of existing) if (m.labels[MANAGED_BY] === MANAGER) targets.add(m.namespace);
    let current = 0;
    for (const ns of [...targets].sort()) {
      const m = found.get(ns);
      if (m && m.data[key] === pem && m.labels[MANAGED_BY] === MANAGER) {
        current++;
        continue;
      }
      if (await this.#write(ns, pem, m !== undefined)) current++;
    }
    this.#view = { namespaces: targets.size, current, lastSync: new Date(this.#o.clock.now()).toISOString() };
    if (current === targets.size) this.#lastError = undefined;
    observer?.synced(true);
    return current === targets.size;
  }

  async #write(ns: string, pem: string, exists: boolean): Promise<boolean> {
    const { api, name, key } = this.#o;
    const observer = this.#observer;
    const signal = this.#stop.signal;
    const op = exists ? 'update' : 'create';
    try {
      // A merge patch touches our key and label only: other keys, labels and annotations stay.
      const patch = { metadata: { labels: { [MANAGED_BY]: MANAGER } }, data: { [key]: pem } };
      const result = exists
        ? await api
            .mergePatch(`/api/v1/namespaces/${ns}/configmaps/${name}`, patch, signal)
            .then(() => 'ok' as const)
        : await api.create(
            ns,
            {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { ...patch.metadata, name, namespace: ns },
              data: patch.data,
            },
            signal,
          );
      observer?.wrote(op, result);
      if (result === 'ok') this.#o.log.info('trust bundle written', { namespace: ns, op });
      return result === 'ok';
    } catch (e) {
      observer?.wrote(op, 'error');
      this.#failed(`${op}:${ns}`, e, { namespace: ns });
      return false;
    }
  }

  #failed(what: string, e: unknown, fields: Record<string, string> = {}): void {
    if (this.#stop.signal.aborted) return;
    const reason = errorMessage(e);
    this.#lastError = reason;
    this.#problems.warn(what, 'trust bundle distribution failed', { ...fields, reason });
  }

  async #rounds(): Promise<void> {
    const backoff = new Backoff({ initialMs: 1_000, maxMs: this.#o.resyncMs, factor: 2 }, this.#o.random);
    while (!this.#stop.signal.aborted) {
      this.#dirty = false;
      const ok = await this.sync();
      if (ok) backoff.reset();
      if (!this.#dirty) await this.#rest(ok ? this.#o.resyncMs : backoff.next());
    }
  }

  #rest(ms: number): Promise<void> {
    return new Promise((resolve) => {
      let timer: Timer | undefined = undefined;
      const done = (): void => {
        timer?.cancel();
        this.#wake = undefined;
        resolve();
      };
      if (this.#stop.signal.aborted) return done();
      timer = this.#o.clock.setTimer(ms, done);
      this.#wake = done;
    });
  }

  /** Namespace events trigger a round, so a namespace labelled for injection gets its bundle at once. */
  async #watch(): Promise<void> {
    const backoff = new Backoff({ initialMs: 1_000, maxMs: 60_000, factor: 2 }, this.#o.random);
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      try {
        await this.#o.api.watchNamespaces(this.#o.namespaceSelector, () => this.kick(), signal);
        backoff.reset();
      } catch (e) {
        // The periodic rounds still run: a lost watch only delays new namespaces.
        this.#failed('watch', e);
      }
      await this.#o.clock.sleep(backoff.next(), signal).catch(() => {});
    }
  }
}
