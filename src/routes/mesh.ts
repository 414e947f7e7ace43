import type { ServiceTarget } from './backends.ts';
import type { RequestView } from './match.ts';
import { routeKey, type GRPCRoute, type HTTPRoute, type ParentRef } from './objects.ts';
import {
  byPrecedence,
  compileGrpcRules,
  compileRules,
  type CompiledRule,
  type CompiledRules,
  type RankedMatch,
  type RouteKind,
} from './rules.ts';

/**
 * The routes a sidecar applies to its app's calls (the GAMMA profile of Gateway API): HTTPRoutes
 * and GRPCRoutes whose parentRef is a Service (group "", kind Service). For a client in namespace
 * C calling Service S of namespace N on port P:
 * - the consumer routes, those in C that name S (C not N), when there is any for P;
 * - else the producer routes, those in N that name S;
 * - a parentRef with a port applies to that Service port only;
 * - a route in a third namespace applies to no one but clients of that namespace;
 * - of those, the GRPCRoutes when there is any, else the HTTPRoutes: routes of two kinds on one
 *   Service port are not merged, and GRPCRoute is the more specific kind (GEP-1294's order).
 * Matches are ordered by their kind's precedence (rules.ts, grpc-match.ts). `hostnames` are not
 * matched: the Service is the destination already. A route with anything unsupported is not
 * applied at all, and is listed by rejected().
 * A backendRef in another namespace needs no ReferenceGrant (GEP-1294): the route sends the call
 * to a Service its client may call directly, with the client's own identity.
 */
export interface MeshSelected {
  rule: CompiledRule;
  /** The PathPrefix that matched (for ReplacePrefixMatch). */
  prefix?: string;
}

export type MeshLookup =
  /** No route applies: the call goes to the Service as it would without routes. */
  | { kind: 'none' }
  /** Routes of `routes` apply and none matches: answered 404 (gRPC: UNIMPLEMENTED), as a Gateway does. */
  | { kind: 'no_match'; routes: RouteKind }
  | ({ kind: 'route' } & MeshSelected);

interface Attached extends RankedMatch {
  /** The Service port the parentRef names, or undefined for every port. */
  port: number | undefined;
}

/** One audience's routes of a Service, by kind; each list in its kind's precedence. */
type ByKind = Record<RouteKind, Attached[]>;

/** Per Service ("namespace/name"): the producer routes, and the consumer routes by namespace. */
interface ServiceRoutes {
  producer: ByKind;
  consumers: Map<string, ByKind>;
}

/** A route not applied, and why (an unsupported match or filter, an invalid duration). */
export interface RejectedRoute {
  kind: RouteKind;
  route: string;
  reason: string;
}

export class MeshRouteTable {
  readonly #services = new Map<string, ServiceRoutes>();
  readonly #rejected: RejectedRoute[] = [];

  constructor(input: { routes: Iterable<HTTPRoute>; grpcRoutes?: Iterable<GRPCRoute> }) {
    for (const route of input.routes) this.#add(route, compileRules);
    for (const route of input.grpcRoutes ?? []) this.#add(route, compileGrpcRules);
    for (const list of this.#lists()) list.sort(byPrecedence);
  }

  /** Routes that name a Service and are not applied, with the reason. */
  rejected(): readonly RejectedRoute[] {
    return this.#rejected;
  }

  /** Whether any route names a Service: without one, the sidecar routes exactly as before. */
  get empty(): boolean {
    return this.#services.size === 0;
  }

  /** How many Services some route names as its parent. */
  services(): number {
    return this.#services.size;
  }

  lookup(service: string, port: number, client: string, req: RequestView): MeshLookup {
    const routes = this.#services.get(service);
    if (!routes) return NONE;
    const forPort = (lists: ByKind | undefined): { kind: RouteKind; list: Attached[] } | undefined => {
      for (const kind of KINDS) {
        const list = (lists?.[kind] ?? []).filter((a) => a.port === undefined || a.port === port);
        if (list.length > 0) return { kind, list };
      }
      return undefined;
    };
    const chosen = forPort(routes.consumers.get(client)) ?? forPort(routes.producer);
    if (!chosen) return NONE;
    const hit = chosen.list.find((a) => a.match.test(req));
    if (!hit) return chosen.kind === 'GRPCRoute' ? NO_GRPC_MATCH : NO_MATCH;
    return {
      kind: 'route',
      rule: hit.rule,
      ...(hit.match.prefix === undefined ? {} : { prefix: hit.match.prefix }),
    };
  }

  /** Every Service a rule sends to, "namespace/name", for discovery to watch ahead. */
  backends(): Set<string> {
    const out = new Set<string>();
    for (const list of this.#lists())
      for (const a of list) for (const b of a.rule.backends) if ('target' in b) out.add(targetKey(b.target));
    return out;
  }

  *#lists(): Iterable<Attached[]> {
    for (const s of this.#services.values())
      for (const lists of [s.producer, ...s.consumers.values()]) yield* KINDS.map((k) => lists[k]);
  }

  #add<R extends HTTPRoute | GRPCRoute>(route: R, compile: (r: R, grants: 'open') => CompiledRules): void {
    const parents = route.spec.parentRefs.filter(isService);
    if (parents.length === 0) return;
    const compiled = compile(route, 'open');
    if ('unsupported' in compiled) {
      this.#rejected.push({
        kind: route.kind,
        route: routeKey(route.metadata),
        reason: compiled.unsupported,
      });
      return;
    }
    const ns = route.metadata.namespace;
    const created = route.metadata.creationTimestamp ?? '';
    const name = routeKey(route.metadata);
    for (const parent of parents) {
      const serviceNs = parent.namespace ?? ns;
      const key = `${serviceNs}/${parent.name}`;
      let s = this.#services.get(key);
      if (!s) this.#services.set(key, (s = { producer: byKind(), consumers: new Map() }));
      let lists = s.producer;
      if (serviceNs !== ns) {
        lists = s.consumers.get(ns) ?? byKind();
        s.consumers.set(ns, lists);
      }
      const list = lists[route.kind];
      for (const { rule, matches } of compiled.rules)
        for (const [m, match] of matches.entries())
          list.push({ match, rule, port: parent.port, order: [created, name, rule.index, m] });
    }
  }
}

const NONE: MeshLookup = { kind: 'none' };
const NO_MATCH: MeshLookup = { kind: 'no_match', routes: 'HTTPRoute' };
const NO_GRPC_MATCH: MeshLookup = { kind: 'no_match', routes: 'GRPCRoute' };
/** The kinds in GEP-1294's order: of routes of both kinds on one Service port, the first kind's apply. */
const KINDS: readonly RouteKind[] = ['GRPCRoute', 'HTTPRoute'];
const byKind = (): ByKind => ({ GRPCRoute: [], HTTPRoute: [] });

const isService = (p: ParentRef): boolean => p.group === '' && p.kind === 'Service';

const targetKey = (t: ServiceTarget): string => `${t.namespace}/${t.name}`;
