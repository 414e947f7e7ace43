import type { ServiceTarget } from './backends.ts';
import type { RequestView } from './match.ts';
import { routeKey, type HTTPRoute, type ParentRef } from './objects.ts';
import { byPrecedence, compileRules, type CompiledRule, type RankedMatch } from './rules.ts';

/**
 * The routes a sidecar applies to its app's calls (the GAMMA profile of Gateway API): HTTPRoutes
 * whose parentRef is a Service (group "", kind Service). For a client in namespace C calling
 * Service S of namespace N on port P:
 * - the consumer routes, those in C that name S (C not N), when there is any for P;
 * - else the producer routes, those in N that name S;
 * - a parentRef with a port applies to that Service port only;
 * - a route in a third namespace applies to no one but clients of that namespace.
 * Matches are ordered as for a Gateway (rules.ts). `hostnames` are not matched: the Service is
 * the destination already. A route with anything unsupported is not applied at all.
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
  /** Routes apply and none matches: answered 404, as a Gateway does. */
  | { kind: 'no_match' }
  | ({ kind: 'route' } & MeshSelected);

interface Attached extends RankedMatch {
  /** The Service port the parentRef names, or undefined for every port. */
  port: number | undefined;
}

/** Per Service ("namespace/name"): the producer routes, and the consumer routes by namespace. */
interface ServiceRoutes {
  producer: Attached[];
  consumers: Map<string, Attached[]>;
}

export class MeshRouteTable {
  readonly #services = new Map<string, ServiceRoutes>();

  constructor(input: { routes: Iterable<HTTPRoute> }) {
    for (const route of input.routes) this.#add(route);
    for (const s of this.#services.values())
      for (const list of [s.producer, ...s.consumers.values()]) list.sort(byPrecedence);
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
    const forPort = (list: Attached[] | undefined): Attached[] =>
      (list ?? []).filter((a) => a.port === undefined || a.port === port);
    const consumer = forPort(routes.consumers.get(client));
    const chosen = consumer.length > 0 ? consumer : forPort(routes.producer);
    if (chosen.length === 0) return NONE;
    const hit = chosen.find((a) => a.match.test(req));
    if (!hit) return NO_MATCH;
    return {
      kind: 'route',
      rule: hit.rule,
      ...(hit.match.prefix === undefined ? {} : { prefix: hit.match.prefix }),
    };
  }

  /** Every Service a rule sends to, "namespace/name", for discovery to watch ahead. */
  backends(): Set<string> {
    const out = new Set<string>();
    for (const s of this.#services.values())
      for (const list of [s.producer, ...s.consumers.values()])
        for (const a of list)
          for (const b of a.rule.backends) if ('target' in b) out.add(targetKey(b.target));
    return out;
  }

  #add(route: HTTPRoute): void {
    const parents = route.spec.parentRefs.filter(isService);
    if (parents.length === 0) return;
    const compiled = compileRules(route, 'open');
    if ('unsupported' in compiled) return;
    const ns = route.metadata.namespace;
    const created = route.metadata.creationTimestamp ?? '';
    const name = routeKey(route.metadata);
    for (const parent of parents) {
      const serviceNs = parent.namespace ?? ns;
      const key = `${serviceNs}/${parent.name}`;
      let s = this.#services.get(key);
      if (!s) this.#services.set(key, (s = { producer: [], consumers: new Map() }));
      let list = s.producer;
      if (serviceNs !== ns) {
        list = s.consumers.get(ns) ?? [];
        s.consumers.set(ns, list);
      }
      for (const { rule, matches } of compiled.rules)
        for (const [m, match] of matches.entries())
          list.push({ match, rule, port: parent.port, order: [created, name, rule.index, m] });
    }
  }
}

const NONE: MeshLookup = { kind: 'none' };
const NO_MATCH: MeshLookup = { kind: 'no_match' };

const isService = (p: ParentRef): boolean => p.group === '' && p.kind === 'Service';

const targetKey = (t: ServiceTarget): string => `${t.namespace}/${t.name}`;
