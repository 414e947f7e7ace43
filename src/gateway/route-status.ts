import { isIP } from 'node:net';
import type { KubeApi } from '../kube/api.ts';
import type { Condition, ParentRef, ReadStatus, RouteMeta } from '../routes/objects.ts';
import { condition, type GatewayRouteTable } from '../routes/table.ts';
import type { Clock } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import type { StatusKind } from './route-objects.ts';
import { StatusWrites } from './status-writes.ts';

/**
 * Writes the status Gateway API asks of a controller: GatewayClass Accepted, Gateway Accepted and
 * Programmed with each listener's conditions and attached routes, and each route's parents
 * entry (Accepted, ResolvedRefs) for our Gateways, next to other controllers' entries, which are
 * kept. Only when the data is fresh: a status computed from last-known-good data could report a
 * route as detached that the API still has. A status already in place (same conditions, a
 * replica's or our own earlier write) is not written again; lastTransitionTime moves only when a
 * condition's status changes. A failed write is retried at the next change or resync.
 */
export interface RouteStatusOptions {
  api: Required<Pick<KubeApi, 'mergePatch'>>;
  controller: string;
  table: () => GatewayRouteTable;
  /**
   * An object's status as last read. Not the table's copy: the echo of a status write rebuilds no
   * table, and comparing against an older status would write the same status again.
   */
  statusOf: (kind: StatusKind, meta: RouteMeta) => ReadStatus | undefined;
  /** True when the routing data is last-known-good rather than confirmed by the API. */
  stale: () => boolean;
  /** Whether a certificate Secret ("namespace/name") is read and usable. */
  secretUsable: (key: string) => boolean;
  /** True only when the API confirmed the Service does not exist. */
  serviceAbsent: (namespace: string, name: string) => Promise<boolean>;
  /** Written to Gateways' status.addresses. */
  addresses: readonly string[];
  /**
   * Each Gateway's own address (gateway-services.ts), written instead of `addresses`; until it is
   * known, status.addresses is left as it is rather than emptied or pointed at the shared address.
   */
  addressOf?: (gateway: string) => string | undefined;
  clock: Clock;
  logger: Logger;
  debounceMs?: number;
  resyncMs?: number;
}

const BASE = '/apis/gateway.networking.k8s.io/v1';
const enc = encodeURIComponent;

type Desired = Record<string, unknown>;

/**
 * A status as comparable text: keys sorted (the API server re-encodes custom objects with sorted
 * keys) and lastTransitionTime left out (a condition that holds keeps its own).
 */
function canonical(v: unknown): string {
  const norm = (x: unknown): unknown => {
    if (Array.isArray(x)) return x.map(norm);
    if (x === null || typeof x !== 'object') return x;
    const o = x as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(o)
        .filter((k) => k !== 'lastTransitionTime' && o[k] !== undefined)
        .sort()
        .map((k) => [k, norm(o[k])]),
    );
  };
  return JSON.stringify(norm(v));
}

export class RouteStatusWriter extends StatusWrites {
  readonly #o: RouteStatusOptions;

  constructor(o: RouteStatusOptions) {
    super({ ...o, what: 'Gateway API status' });
    this.#o = o;
  }

  protected async pass(): Promise<number> {
    if (this.#o.stale()) return 0;
    const t = this.#o.table();
    let written = 0;
    const write = async (
      path: string,
      key: string,
      have: ReadStatus | undefined,
      want: Desired,
    ): Promise<void> => {
      if (canonical(pick(have, want)) === canonical(want)) return;
      if (await this.write(path, key, { status: want })) written++;
    };
    for (const [name, c] of t.classes()) {
      const have = this.#o.statusOf('GatewayClass', c.metadata);
      const conditions = this.#timed(
        [condition('Accepted', true, 'Accepted'), condition('SupportedVersion', true, 'SupportedVersion')],
        have?.conditions,
        c.metadata.generation,
      );
      await write(`${BASE}/gatewayclasses/${enc(name)}/status`, `GatewayClass ${name}`, have, {
        conditions,
      });
    }
    for (const [key, g] of t.gateways()) {
      const gen = g.metadata.generation;
      const have = this.#o.statusOf('Gateway', g.metadata);
      const listeners = t.listenerStatus(key, this.#o.secretUsable).map((l) => ({
        ...l,
        conditions: this.#timed(l.conditions, listenerConditions(have, l.name), gen),
      }));
      const addresses = this.#addressesOf(key);
      const want = {
        ...(addresses ? { addresses } : {}),
        conditions: this.#timed(gatewayConditions(listeners), have?.conditions, gen),
        listeners,
      };
      const path = `${BASE}/namespaces/${enc(g.metadata.namespace)}/gateways/${enc(g.metadata.name)}/status`;
      await write(path, `Gateway ${key}`, have, want);
    }
    for (const [key, route] of t.routes()) {
      const missing = await this.#missingBackend(t, key);
      const status = this.#o.statusOf(route.kind, route.metadata);
      const ours = (t.routeStatus().get(key) ?? []).map((p) => {
        const have = status?.parents?.find(
          (x) =>
            x.controllerName === this.#o.controller &&
            canonical(x.parentRef) === canonical(refOut(p.parentRef)),
        );
        const conditions = p.conditions.map((c) =>
          c.type === 'ResolvedRefs' && c.status === 'True' && missing
            ? condition('ResolvedRefs', false, 'BackendNotFound', missing)
            : c,
        );
        return {
          parentRef: refOut(p.parentRef),
          controllerName: this.#o.controller,
          conditions: this.#timed(conditions, have?.conditions, route.metadata.generation),
        };
      });
      const others = (status?.parents ?? []).filter((x) => x.controllerName !== this.#o.controller);
      const path = `${BASE}/namespaces/${enc(route.metadata.namespace)}/${route.kind.toLowerCase()}s/${enc(route.metadata.name)}/status`;
      await write(path, key, status, {
        parents: [...others, ...ours],
      });
    }
    return written;
  }

  #addressesOf(gateway: string): { type: string; value: string }[] | undefined {
    const own = this.#o.addressOf;
    const values = own ? [own(gateway)].flatMap((a) => (a ? [a] : [])) : this.#o.addresses;
    if (own && values.length === 0) return undefined;
    return values.map((value) => ({ type: isIP(value) ? 'IPAddress' : 'Hostname', value }));
  }

  async #missingBackend(t: GatewayRouteTable, route: string): Promise<string | undefined> {
    for (const b of t.backendsOf(route)) {
      if (await this.#o.serviceAbsent(b.namespace, b.name))
        return `Service ${b.namespace}/${b.name} does not exist`;
    }
    return undefined;
  }

  /** The API's required times: a condition keeps its lastTransitionTime while its status holds. */
  #timed(
    conditions: readonly Condition[],
    have: readonly Condition[] | undefined,
    generation: number | undefined,
  ): Condition[] {
    const now = new Date(this.#o.clock.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
    return conditions.map((c) => {
      const prev = have?.find((h) => h.type === c.type);
      return {
        ...c,
        ...(generation === undefined ? {} : { observedGeneration: generation }),
        lastTransitionTime:
          prev?.status === c.status && prev.lastTransitionTime ? prev.lastTransitionTime : now,
      };
    });
  }
}

/**
 * A Gateway is Accepted when one of its listeners is (ListenersNotValid names the others), and
 * Programmed when one of them is programmed.
 */
function gatewayConditions(listeners: { conditions: Condition[] }[]): Condition[] {
  const holds = (type: string): number =>
    listeners.filter((l) => l.conditions.some((c) => c.type === type && c.status === 'True')).length;
  const accepted = holds('Accepted');
  const programmed = holds('Programmed');
  return [
    accepted === listeners.length
      ? condition('Accepted', true, 'Accepted')
      : condition(
          'Accepted',
          accepted > 0,
          'ListenersNotValid',
          `${listeners.length - accepted} listener(s) not accepted`,
        ),
    programmed > 0
      ? condition('Programmed', true, 'Programmed')
      : condition('Programmed', false, 'Invalid', 'no listener is programmed'),
  ];
}

/** The fields of a read status that a wanted one sets (the rest is not ours to compare). */
function pick(have: ReadStatus | undefined, want: Desired): Desired {
  const out: Desired = {};
  for (const k of Object.keys(want)) out[k] = (have as Desired | undefined)?.[k] ?? [];
  return out;
}

function listenerConditions(status: ReadStatus | undefined, name: string): Condition[] | undefined {
  const listeners = (status?.listeners ?? []) as { name?: string; conditions?: Condition[] }[];
  return listeners.find((l) => l.name === name)?.conditions;
}

/** A parentRef as the API echoes it in status (defaults written out). */
function refOut(r: ParentRef) {
  return {
    group: r.group,
    kind: r.kind,
    name: r.name,
    ...(r.namespace === undefined ? {} : { namespace: r.namespace }),
    ...(r.sectionName === undefined ? {} : { sectionName: r.sectionName }),
    ...(r.port === undefined ? {} : { port: r.port }),
  };
}
