import type { Reflector } from '../discovery/reflector.ts';
import type { NewReflector } from '../discovery/reflectors.ts';
import {
  routeKey,
  slimGateway,
  slimGatewayClass,
  slimGRPCRoute,
  slimHTTPRoute,
  slimNamespace,
  slimReferenceGrant,
  type Gateway,
  type GatewayClass,
  type GRPCRoute,
  type HTTPRoute,
  type NamespaceLabels,
  type ReferenceGrant,
  type ReadStatus,
  type RouteMeta,
} from '../routes/objects.ts';
import { GatewayRouteTable } from '../routes/table.ts';
import { ObjectSet, type SetChange } from '../discovery/object-set.ts';

/**
 * The Gateway API objects the gateway reads (`--gateway-api`), under the same last-known-good
 * rules as its Ingresses: GatewayClasses (cluster-scoped), Gateways, HTTPRoutes, GRPCRoutes and
 * ReferenceGrants of one namespace or all, and Namespaces' labels (listeners may admit routes by a
 * namespace selector). Each collection is an ObjectSet fed by a Reflector; a
 * failed or partial read never removes an object, and a snapshot's objects are served (stale)
 * until a complete list confirms them.
 */
const GROUP = '/apis/gateway.networking.k8s.io/v1';
const namespaced = (resource: string, ns: string | undefined): string =>
  ns === undefined ? `${GROUP}/${resource}` : `${GROUP}/namespaces/${encodeURIComponent(ns)}/${resource}`;

type Any = GatewayClass | Gateway | HTTPRoute | GRPCRoute | ReferenceGrant | NamespaceLabels;
type Kind = Any['kind'];
type Of<K extends Kind> = Extract<Any, { kind: K }>;

const SLIM: { [K in Kind]: (raw: unknown) => Of<K> } = {
  GatewayClass: slimGatewayClass,
  Gateway: slimGateway,
  HTTPRoute: slimHTTPRoute,
  GRPCRoute: slimGRPCRoute,
  ReferenceGrant: slimReferenceGrant,
  Namespace: slimNamespace,
};
const KINDS = Object.keys(SLIM) as Kind[];
/** The kinds whose status the gateway writes. */
export type StatusKind = 'GatewayClass' | 'Gateway' | 'HTTPRoute' | 'GRPCRoute';

export class RouteObjects {
  readonly #sets: { [K in Kind]: ObjectSet<Of<K>> };
  readonly #reflectors: Reflector[];

  constructor(
    reflector: NewReflector,
    namespace: string | undefined,
    changed: (change: SetChange) => void,
    now: () => number,
  ) {
    // The API omits kind on list items; the slimmed object says what it is.
    const set = <K extends Kind>(kind: K): ObjectSet<Of<K>> =>
      new ObjectSet(
        (raw) => {
          const v = SLIM[kind](raw);
          return { key: routeKey(v.metadata), value: v };
        },
        changed,
        now,
      );
    this.#sets = {
      GatewayClass: set('GatewayClass'),
      Gateway: set('Gateway'),
      HTTPRoute: set('HTTPRoute'),
      GRPCRoute: set('GRPCRoute'),
      ReferenceGrant: set('ReferenceGrant'),
      Namespace: set('Namespace'),
    };
    this.#reflectors = [
      reflector('gatewayclasses', `${GROUP}/gatewayclasses`, {}, this.#sets.GatewayClass),
      reflector('gateways', namespaced('gateways', namespace), {}, this.#sets.Gateway),
      reflector('httproutes', namespaced('httproutes', namespace), {}, this.#sets.HTTPRoute),
      reflector('grpcroutes', namespaced('grpcroutes', namespace), {}, this.#sets.GRPCRoute),
      reflector('referencegrants', namespaced('referencegrants', namespace), {}, this.#sets.ReferenceGrant),
      // Labels only, for listeners that admit routes by a namespace selector.
      reflector('namespaces', '/api/v1/namespaces', {}, this.#sets.Namespace),
    ];
  }

  start(): void {
    for (const r of this.#reflectors) r.start();
  }

  stop(): Promise<void[]> {
    return Promise.all(this.#reflectors.map((r) => r.stop()));
  }

  /** Every collection listed once (or loaded from a snapshot). */
  listed(): boolean {
    return Object.values(this.#sets).every((s) => s.listed);
  }

  failures(): { collection: string; reason: string; since: number }[] {
    return Object.entries(this.#sets).flatMap(([kind, s]) =>
      s.failure ? [{ collection: kind, ...s.failure }] : [],
    );
  }

  table(controller: string): GatewayRouteTable {
    const s = this.#sets;
    return new GatewayRouteTable({
      controller,
      classes: s.GatewayClass.items.values(),
      gateways: s.Gateway.items.values(),
      routes: s.HTTPRoute.items.values(),
      grpcRoutes: s.GRPCRoute.items.values(),
      grants: s.ReferenceGrant.items.values(),
      namespaces: new Map([...s.Namespace.items.values()].map((n) => [n.metadata.name, n.metadata.labels])),
    });
  }

  /** The objects as JSON text, for the snapshot. */
  collect(): string[] {
    return Object.values(this.#sets).flatMap((s) => [...s.items.values()].map((v) => JSON.stringify(v)));
  }

  /** An object's status as last read (the table holds the copy it was built from). */
  statusOf(kind: StatusKind, meta: RouteMeta): ReadStatus | undefined {
    return this.#sets[kind].items.get(routeKey(meta))?.status;
  }

  /** Objects from a snapshot; undecodable entries are skipped. Returns how many were loaded. */
  load(texts: readonly string[]): number {
    const by = new Map<Kind, [string, Any][]>();
    for (const t of texts) {
      const raw = JSON.parse(t) as { kind?: unknown } | null;
      const kind = KINDS.find((k) => k === raw?.kind);
      if (!kind) continue;
      const v = SLIM[kind](raw);
      by.set(v.kind, [...(by.get(v.kind) ?? []), [routeKey(v.metadata), v]]);
    }
    // A collection that was empty when the snapshot was written is as much last-known-good.
    for (const kind of KINDS) (this.#sets[kind] as ObjectSet<Any>).load(by.get(kind) ?? []);
    return texts.length;
  }
}
