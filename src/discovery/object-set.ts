import type { ReflectorSink } from './reflector.ts';

/**
 * What a change touched: `data` what a table is built from, `state` only listed/failure (staleness),
 * `status` only an object's status or resourceVersion (a status write's own echo), which no table
 * reads.
 */
export type SetChange = 'data' | 'state' | 'status';

/**
 * One collection read from the API (the gateway's Ingresses, a sidecar's HTTPRoutes), as a reflector
 * delivers it, under the last-known-good rules: only a complete list replaces the set (the only
 * time absence means deletion), watch events patch it, and a failure removes nothing — it marks
 * the set stale. slim() returning undefined means "not an object we keep" (a Secret that is not of
 * type kubernetes.io/tls): it is treated like a deletion of that key.
 */
export class ObjectSet<T extends object> implements ReflectorSink {
  readonly items = new Map<string, T>();
  /** A complete list has been applied (or the set was loaded from a snapshot). */
  listed = false;
  /** Set while the last request failed; cleared by the next success. */
  failure: { reason: string; since: number } | undefined;
  readonly #slim: (raw: unknown) => { key: string; value: T | undefined };
  readonly #onChange: (change: SetChange) => void;
  readonly #now: () => number;

  constructor(
    slim: (raw: unknown) => { key: string; value: T | undefined },
    onChange: (change: SetChange) => void,
    now: () => number,
  ) {
    this.#slim = slim;
    this.#onChange = onChange;
    this.#now = now;
  }

  /** Data from a snapshot: served (stale) until the first complete list replaces it. */
  load(values: Iterable<[string, T]>): void {
    for (const [k, v] of values) this.items.set(k, v);
    this.failure = { reason: 'loaded from snapshot', since: this.#now() };
  }

  replace(items: unknown[]): void {
    this.items.clear();
    for (const raw of items) {
      const { key, value } = this.#slim(raw);
      if (value !== undefined) this.items.set(key, value);
    }
    this.listed = true;
    this.#onChange('data');
  }

  event(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: unknown): void {
    const { key, value } = this.#slim(object);
    const before = this.items.get(key);
    if (type === 'DELETED' || value === undefined) this.items.delete(key);
    else this.items.set(key, value);
    const statusOnly =
      before !== undefined && value !== undefined && type !== 'DELETED' && sameButStatus(before, value);
    this.#onChange(statusOnly ? 'status' : 'data');
  }

  synced(): void {
    if (!this.failure) return;
    // Snapshot data stays stale until a list has confirmed it.
    if (this.failure.reason === 'loaded from snapshot' && !this.listed) return;
    this.failure = undefined;
    this.#onChange('state');
  }

  failed(reason: string): void {
    if (this.failure) return;
    this.failure = { reason, since: this.#now() };
    this.#onChange('state');
  }
}

/** Equal but for status and metadata.resourceVersion. Slimmed objects are small; text compares them. */
function sameButStatus(a: object, b: object): boolean {
  const rest = (o: object): string => {
    const { status: _s, metadata, ...other } = o as { status?: unknown; metadata?: object };
    const { resourceVersion: _rv, ...meta } = (metadata ?? {}) as { resourceVersion?: unknown };
    return JSON.stringify([meta, other]);
  };
  return rest(a) === rest(b);
}
