import type { KubeApi } from '../kube/api.ts';
import type { Clock, Timer } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { loadBalancerIngress, objectKey, type Ingress } from './objects.ts';

/**
 * Publishes the gateway's address in `status.loadBalancer` of every Ingress it serves
 * (`--publish-status-address`), as ingress-nginx's flag of the same name does: written only when
 * an Ingress's status differs, so replicas that agree write once between them (the second sees
 * the first's write as a watch event and has nothing left to do). A failed write is retried at
 * the next change or resync; it never affects routing. Ingresses that stop being served keep the
 * last status written (clearing it could fight another controller that took them over).
 */
export interface StatusPublisherOptions {
  api: Required<Pick<KubeApi, 'mergePatch'>>;
  addresses: readonly string[];
  served: () => Ingress[];
  clock: Clock;
  logger: Logger;
  /** Every change is published after this quiet time (a relist writes once). */
  debounceMs?: number;
  /** Re-checks everything this often, which also retries failed writes. */
  resyncMs?: number;
}

const statusPath = (ing: Ingress): string =>
  `/apis/networking.k8s.io/v1/namespaces/${encodeURIComponent(ing.metadata.namespace)}/ingresses/${encodeURIComponent(ing.metadata.name)}/status`;

export class StatusPublisher {
  readonly #o: StatusPublisherOptions;
  readonly #want: string;
  readonly #failing = new Map<string, string>();
  readonly #stop = new AbortController();
  #timer: Timer | undefined;
  #resync: Timer | undefined;
  #running: Promise<number> | undefined;
  writes = 0;

  constructor(o: StatusPublisherOptions) {
    this.#o = o;
    this.#want = [...o.addresses].sort().join(',');
    this.#armResync();
  }

  /** Something changed: publish after a short quiet time. */
  schedule(): void {
    if (this.#stop.signal.aborted) return;
    this.#timer ??= this.#o.clock.setTimer(this.#o.debounceMs ?? 200, () => {
      this.#timer = undefined;
      void this.sync();
    });
  }

  /** Writes every served Ingress whose status differs; resolves with the number written. */
  sync(): Promise<number> {
    this.#running ??= this.#syncOnce().finally(() => (this.#running = undefined));
    return this.#running;
  }

  close(): void {
    this.#stop.abort();
    this.#timer?.cancel();
    this.#resync?.cancel();
  }

  async #syncOnce(): Promise<number> {
    let written = 0;
    const patch = { status: { loadBalancer: { ingress: loadBalancerIngress(this.#o.addresses) } } };
    for (const ing of this.#o.served()) {
      if (this.#stop.signal.aborted) break;
      if ([...(ing.status?.addresses ?? [])].sort().join(',') === this.#want) continue;
      const key = objectKey(ing.metadata);
      try {
        await this.#o.api.mergePatch(statusPath(ing), patch, this.#stop.signal);
        written++;
        this.writes++;
        if (this.#failing.delete(key)) this.#o.logger.info('Ingress status written again', { ingress: key });
      } catch (e) {
        const reason = errorMessage(e);
        if (this.#failing.get(key) !== reason)
          this.#o.logger.warn('Ingress status not written; retrying later', { ingress: key, reason });
        this.#failing.set(key, reason);
      }
    }
    return written;
  }

  #armResync(): void {
    this.#resync = this.#o.clock.setTimer(this.#o.resyncMs ?? 30_000, () => {
      if (this.#stop.signal.aborted) return;
      void this.sync();
      this.#armResync();
    });
  }
}
