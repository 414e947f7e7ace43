import type { KubeApi } from '../kube/api.ts';
import type { Clock } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import { loadBalancerIngress, objectKey, type Ingress } from './objects.ts';
import { StatusWrites } from './status-writes.ts';

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

export class StatusPublisher extends StatusWrites {
  readonly #o: StatusPublisherOptions;
  readonly #want: string;

  constructor(o: StatusPublisherOptions) {
    super({ ...o, what: 'Ingress status', keyField: 'ingress' });
    this.#o = o;
    this.#want = [...o.addresses].sort().join(',');
  }

  protected async pass(): Promise<number> {
    let written = 0;
    const patch = { status: { loadBalancer: { ingress: loadBalancerIngress(this.#o.addresses) } } };
    for (const ing of this.#o.served()) {
      if (this.stopped) break;
      if ([...(ing.status?.addresses ?? [])].sort().join(',') === this.#want) continue;
      if (await this.write(statusPath(ing), objectKey(ing.metadata), patch)) written++;
    }
    return written;
  }
}
