/**
 * A shared "the API server answers again" signal. Every reflector backs off on its own (full
 * jitter, 30 s cap), so after an outage the first one to get through tells the others, which then
 * retry within a short random spread instead of waiting out the rest of their backoff. With many
 * subscriptions one lucky early retry ends the outage for all, and the spread keeps the sidecar's own
 * reconnects from arriving in one burst.
 */
export class Recovery {
  #waiters = new Set<() => void>();

  /** Resolves at the next notify(). The returned cancel drops the waiter. */
  wait(): { promise: Promise<void>; cancel: () => void } {
    let fn!: () => void;
    const promise = new Promise<void>((resolve) => (fn = resolve));
    this.#waiters.add(fn);
    return { promise, cancel: () => this.#waiters.delete(fn) };
  }

  notify(): void {
    const ws = [...this.#waiters];
    this.#waiters.clear();
    for (const w of ws) w();
  }
}
