import { slimService, type KService } from './objects.ts';
import type { ReflectorSink } from './reflector.ts';

/**
 * Services of one scope (the whole cluster, for the ClusterIP index, or one namespace), as the
 * reflector delivers them. `listed` turns true with the first complete list and never back: until
 * then, a missing Service is "not known yet", not "absent".
 */
export class ServiceSet implements ReflectorSink {
  readonly services = new Map<string, KService>();
  listed = false;
  failure: string | undefined;
  readonly #onChange: (keys: Iterable<string>) => void;
  readonly #onHealth: () => void;

  constructor(onChange: (keys: Iterable<string>) => void, onHealth: () => void) {
    this.#onChange = onChange;
    this.#onHealth = onHealth;
  }

  replace(items: unknown[]): void {
    const next = new Map<string, KService>();
    for (const raw of items) {
      const s = slimService(raw);
      next.set(`${s.metadata.namespace}/${s.metadata.name}`, s);
    }
    const changed = new Set<string>();
    for (const [k, s] of next)
      if (this.services.get(k)?.metadata.resourceVersion !== s.metadata.resourceVersion) changed.add(k);
    for (const k of this.services.keys()) if (!next.has(k)) changed.add(k);
    this.services.clear();
    for (const [k, s] of next) this.services.set(k, s);
    this.listed = true;
    this.#onChange(changed);
  }

  event(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: unknown): void {
    const s = slimService(object);
    const k = `${s.metadata.namespace}/${s.metadata.name}`;
    if (type === 'DELETED') this.services.delete(k);
    else this.services.set(k, s);
    this.#onChange([k]);
  }

  synced(): void {
    this.failure = undefined;
    this.#onHealth();
  }

  failed(reason: string): void {
    this.failure = reason;
    this.#onHealth();
  }
}
