import type { KubeApi } from '../kube/api.ts';
import type { GatewayRouteTable } from '../routes/table.ts';
import type { Clock } from '../shared/clock.ts';
import { obj, str } from '../shared/json.ts';
import type { Logger } from '../shared/log.ts';
import { assignPodPorts, serviceFor, serviceName, type Binding } from './addresses.ts';
import { StatusWrites } from './status-writes.ts';

/**
 * Keeps a Service per Gateway of our class (addresses.ts) in the gateway's namespace, by
 * server-side apply under our field manager: created when missing, ports updated when the
 * Gateway's listeners change, never deleted. A Service someone else owns the fields of is a
 * conflict, logged and left alone. Writes happen only when the routing data is fresh: from
 * last-known-good data, a Service could be given the ports of a Gateway the API has changed.
 * Each Service's ClusterIP becomes its Gateway's status address.
 */
export interface GatewayServicesOptions {
  api: Required<Pick<KubeApi, 'apply'>>;
  /** The gateway's namespace (its pods'). */
  namespace: string;
  /** The gateway pods' labels. */
  selector: Readonly<Record<string, string>>;
  table: () => GatewayRouteTable;
  /** True when the routing data is last-known-good rather than confirmed by the API. */
  stale: () => boolean;
  /** A Gateway's address was learned or changed. */
  onAddress: () => void;
  clock: Clock;
  logger: Logger;
  debounceMs?: number;
  resyncMs?: number;
  /** A Service applied is applied again after this long, in case it was deleted or edited. */
  reapplyMs?: number;
}

export const FIELD_MANAGER = 'outrigger-gateway';

const enc = encodeURIComponent;

export class GatewayServices extends StatusWrites {
  readonly #o: GatewayServicesOptions;
  /** Per Gateway: the Service last applied (as text) and when. */
  readonly #applied = new Map<string, { text: string; at: number }>();
  readonly #addresses = new Map<string, string>();

  constructor(o: GatewayServicesOptions) {
    const { api: _apply, ...rest } = o;
    super({ ...rest, what: 'Gateway Service', keyField: 'gateway' });
    this.#o = o;
  }

  /** A Gateway's address (its Service's ClusterIP), once its Service was applied. */
  addressOf(gateway: string): string | undefined {
    return this.#addresses.get(gateway);
  }

  protected async pass(): Promise<number> {
    if (this.#o.stale()) return 0;
    const t = this.#o.table();
    const bindings = byGateway(assignPodPorts(t.gateways().values()));
    let written = 0;
    for (const gateway of t.gateways().keys()) {
      if (this.stopped) break;
      if (await this.#apply(gateway, bindings.get(gateway) ?? [])) written++;
    }
    return written;
  }

  async #apply(gateway: string, bindings: readonly Binding[]): Promise<boolean> {
    // A Gateway without an HTTP or HTTPS listener has nothing to serve at an address.
    if (bindings.length === 0) return false;
    const want = serviceFor(gateway, bindings, this.#o);
    const text = JSON.stringify(want);
    const now = this.#o.clock.now();
    const last = this.#applied.get(gateway);
    if (last?.text === text && now - last.at < (this.#o.reapplyMs ?? 300_000)) return false;
    const path = `/api/v1/namespaces/${enc(this.#o.namespace)}/services/${enc(serviceName(gateway))}`;
    const done = await this.attempt(gateway, (signal) =>
      this.#o.api.apply(path, want, FIELD_MANAGER, signal),
    );
    if (!done) return false;
    this.#applied.set(gateway, { text, at: now });
    this.#learn(gateway, clusterIP(done.value));
    return true;
  }

  #learn(gateway: string, ip: string | undefined): void {
    if (!ip || this.#addresses.get(gateway) === ip) return;
    this.#addresses.set(gateway, ip);
    this.#o.onAddress();
  }
}

function byGateway(bindings: readonly Binding[]): Map<string, Binding[]> {
  const out = new Map<string, Binding[]>();
  for (const b of bindings) out.set(b.gateway, [...(out.get(b.gateway) ?? []), b]);
  return out;
}

/** A Service's ClusterIP; none for a headless one or before the API assigned it. */
function clusterIP(service: unknown): string | undefined {
  const ip = str(obj(obj(service).spec).clusterIP);
  return ip && ip !== 'None' ? ip : undefined;
}
