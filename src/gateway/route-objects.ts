import type { Reflector } from '../discovery/reflector.ts';
import type { NewReflector } from '../discovery/reflectors.ts';
import {
  routeKey,
  slimGateway,
  slimGatewayClass,
  slimHTTPRoute,
  slimNamespace,
  slimReferenceGrant,
  type Gateway,
  type GatewayClass,
  type HTTPRoute,
  type NamespaceLabels,
  type ReferenceGrant,
} from '../routes/objects.ts';
import { GatewayRouteTable } from '../routes/table.ts';
import { ObjectSet } from './object-set.ts';

/**
 * The Gateway API objects the gateway reads (`--gateway-api`), under the same last-known-good
 * rules as its Ingresses: GatewayClasses (cluster-scoped), Gateways, HTTPRoutes and
 * ReferenceGrants of one namespace or all, and Namespaces' labels (listeners may admit routes by a
 * namespace selector). Each collection is an ObjectSet fed by a Reflector; a
 * failed or partial read never removes an object, and a snapshot's objects are served (stale)
 * until a complete list confirms them.
 */
const GROUP = '/apis/gateway.networking.k8s.io/v1';
const namespaced = (resource: string, ns: string | undefined): string =>
  ns === undefined ? `${GROUP}/${resource}` : `${GROUP}/namespaces/${encodeURIComponent(ns)}/${resource}`;

type Any = GatewayClass | Gateway | HTTPRoute | ReferenceGrant | NamespaceLabels;

const slimAny = (raw: unknown): Any | undefined => {
  switch ((raw as { kind?: unknown } | null)?.kind) {
    case 'GatewayClass':
      return slimGatewayClass(raw);
    case 'Gateway':
      return slimGateway(raw);
    case 'HTTPRoute':
      return slimHTTPRoute(raw);
    case 'ReferenceGrant':
      return slimReferenceGrant(raw);
    case 'Namespace':
      return slimNamespace(raw);
    default:
      return undefined;
  }
};

export class RouteObjects {
  readonly #sets: { [K in Any['kind']]: ObjectSet<Extract<Any, { kind: K }>> };
  readonly #reflectors: Reflector[];

  constructor(
    reflector: NewReflector,
    namespace: string | undefined,
    changed: () => void,
    now: () => number,
  ) {
    // The API omits kind on list items; the slimmed object says what it is.
    const set = <T extends Any>(slim: (raw: unknown) => T): ObjectSet<T> =>
      new ObjectSet(
        (raw) => {
          const v = slim(raw);
          return { key: routeKey(v.metadata), value: v };
        },
        changed,
        now,
      );
    this.#sets = {
      GatewayClass: set((r) => slimGatewayClass(r)),
      Gateway: set((r) => slimGateway(r)),
      HTTPRoute: set((r) => slimHTTPRoute(r)),
      ReferenceGrant: set((r) => slimReferenceGrant(r)),
      Namespace: set((r) => slimNamespace(r)),
    };
    this.#reflectors = [
      reflector('gatewayclasses', `${GROUP}/gatewayclasses`, {}, this.#sets.GatewayClass),
      reflector('gateways', namespaced('gateways', namespace), {}, this.#sets.Gateway),
      reflector('httproutes', namespaced('httproutes', namespace), {}, this.#sets.HTTPRoute),
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
      grants: s.ReferenceGrant.items.values(),
      namespaces: new Map([...s.Namespace.items.values()].map((n) => [n.metadata.name, n.metadata.labels])),
    });
  }

  /** The objects as JSON text, for the snapshot. */
  collect(): string[] {
    return Object.values(this.#sets).flatMap((s) => [...s.items.values()].map((v) => JSON.stringify(v)));
  }

  /** Objects from a snapshot; undecodable entries are skipped. Returns how many were loaded. */
  load(texts: readonly string[]): number {
    const by = new Map<Any['kind'], [string, Any][]>();
    for (const t of texts) {
      const v = slimAny(JSON.parse(t));
      if (!v) continue;
      by.set(v.kind, [...(by.get(v.kind) ?? []), [routeKey(v.metadata), v]]);
    }
    // A collection that was empty when the snapshot was written is as much last-known-good.
    for (const [kind, set] of Object.entries(this.#sets)) {
      (set as ObjectSet<Any>).load(by.get(kind as Any['kind']) ?? []);
    }
    return texts.length;
  }
}
