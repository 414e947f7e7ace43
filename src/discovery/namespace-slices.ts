import type { Clock, Timer } from '../shared/clock.ts';
import { SERVICE_NAME_LABEL, slimSlice, type KEndpointSlice } from './objects.ts';
import type { Reflector, ReflectorSink } from './reflector.ts';

export interface NamespaceSlicesOptions {
  clock: Clock;
  /** Makes the one reflector of this namespace (not started). */
  reflector(selectors: Record<string, string>, sink: ReflectorSink): Reflector;
  /** These Services' slices or freshness changed. */
  onChange(names: Iterable<string>): void;
  /**
   * Set changes within this window share one re-watch (an app's first calls come in a burst).
   * 0: only changes made in the same tick are batched.
   */
  batchMs: number;
}

/** The label selector for a set of Service names; names are DNS labels, so no quoting is needed. */
export const selectorFor = (names: Iterable<string>): string =>
  `${SERVICE_NAME_LABEL} in (${[...names].sort().join(',')})`;

/** The Service names a selector made by selectorFor() covers. */
export function namesOf(selectors: Record<string, string>): Set<string> {
  const m = /^[^ ]+ in \(([^)]*)\)$/.exec(selectors.labelSelector ?? '');
  return new Set(m?.[1] ? m[1].split(',') : []);
}

/**
 * The EndpointSlices of the subscribed Services of one namespace, from ONE watch with a set-based
 * selector (`kubernetes.io/service-name in (a,b,c)`) instead of one watch per Service. When the set
 * changes the watch is re-established: from the last resourceVersion when a Service leaves, and
 * after a list of the whole set (at that resourceVersion or newer) when one joins.
 *
 * Last-known-good: a Service counts as listed only once a complete list made with it in the
 * selector has succeeded, and only such a list replaces its slices. A set change never touches the
 * other Services' slices; a failed relist replaces nothing.
 */
export class NamespaceSlices implements ReflectorSink {
  readonly #o: NamespaceSlicesOptions;
  readonly #names = new Set<string>();
  readonly #slices = new Map<string, Map<string, KEndpointSlice>>();
  readonly #listed = new Set<string>();
  #reflector: Reflector | undefined;
  /** Slice name → the Service it belongs to (a slice can be relabelled from one to another). */
  readonly #owner = new Map<string, string>();
  #pending: { relist: boolean } | undefined;
  #timer: Timer | undefined;
  #closed = false;
  failure: string | undefined;

  constructor(o: NamespaceSlicesOptions) {
    this.#o = o;
  }

  get size(): number {
    return this.#names.size;
  }

  get watching(): boolean {
    return this.#reflector?.watching ?? false;
  }

  listed(name: string): boolean {
    return this.#listed.has(name);
  }

  slicesOf(name: string): KEndpointSlice[] {
    return [...(this.#slices.get(name)?.values() ?? [])];
  }

  add(name: string): void {
    if (this.#names.has(name)) return;
    this.#names.add(name);
    this.#schedule(true);
  }

  remove(name: string): void {
    if (!this.#names.delete(name)) return;
    for (const slice of this.#slices.get(name)?.keys() ?? []) this.#owner.delete(slice);
    this.#slices.delete(name);
    this.#listed.delete(name);
    if (this.#names.size > 0) this.#schedule(false);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#pending = undefined;
    await this.#reflector?.stop();
  }

  #schedule(relist: boolean): void {
    const scheduled = this.#pending !== undefined;
    this.#pending = { relist: relist || (this.#pending?.relist ?? false) };
    if (scheduled) return;
    if (this.#o.batchMs > 0) this.#timer = this.#o.clock.setTimer(this.#o.batchMs, () => this.#flush());
    else queueMicrotask(() => this.#flush());
  }

  #flush(): void {
    const pending = this.#pending;
    this.#pending = undefined;
    this.#timer = undefined;
    if (!pending || this.#closed || this.#names.size === 0) return;
    const selectors = { labelSelector: selectorFor(this.#names) };
    if (this.#reflector) {
      this.#reflector.reselect(selectors, pending);
      return;
    }
    this.#reflector = this.#o.reflector(selectors, this);
    this.#reflector.start();
  }

  // ---- ReflectorSink ----

  replace(items: unknown[], selectors: Record<string, string>): void {
    const covered = namesOf(selectors);
    const next = new Map<string, Map<string, KEndpointSlice>>();
    for (const raw of items) {
      const s = slimSlice(raw);
      const name = s.metadata.labels?.[SERVICE_NAME_LABEL];
      if (name === undefined || !covered.has(name)) continue;
      const m = next.get(name) ?? new Map<string, KEndpointSlice>();
      m.set(s.metadata.name, s);
      next.set(name, m);
    }
    const changed: string[] = [];
    // Only Services that were in the list's selector AND are still subscribed: one added after the
    // list was sent is not in it, so its absence there means nothing.
    for (const name of covered) {
      if (!this.#names.has(name)) continue;
      for (const slice of this.#slices.get(name)?.keys() ?? []) this.#owner.delete(slice);
      const mine = next.get(name) ?? new Map<string, KEndpointSlice>();
      for (const slice of mine.keys()) this.#owner.set(slice, name);
      this.#slices.set(name, mine);
      this.#listed.add(name);
      changed.push(name);
    }
    this.#o.onChange(changed);
  }

  event(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: unknown): void {
    const s = slimSlice(object);
    const label = s.metadata.labels?.[SERVICE_NAME_LABEL];
    // A Service that just left the set may still have events in flight; it is not ours any more.
    const name = label !== undefined && this.#names.has(label) ? label : undefined;
    const before = this.#owner.get(s.metadata.name);
    const changed = new Set<string>();
    if (before !== undefined && (before !== name || type === 'DELETED')) {
      this.#slices.get(before)?.delete(s.metadata.name);
      this.#owner.delete(s.metadata.name);
      changed.add(before);
    }
    if (name !== undefined && type !== 'DELETED') {
      const m = this.#slices.get(name) ?? new Map<string, KEndpointSlice>();
      this.#slices.set(name, m);
      m.set(s.metadata.name, s);
      this.#owner.set(s.metadata.name, name);
      changed.add(name);
    }
    if (changed.size > 0) this.#o.onChange(changed);
  }

  synced(): void {
    this.failure = undefined;
    this.#o.onChange(this.#names);
  }

  failed(reason: string): void {
    this.failure = reason;
    this.#o.onChange(this.#names);
  }
}
