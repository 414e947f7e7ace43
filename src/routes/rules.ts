import { resolveBackend, type CrossNamespace, type RouteBackend } from './backends.ts';
import { parseDuration } from './duration.ts';
import { compileGrpcMatch } from './grpc-match.ts';
import { compareRanks, compileMatch, type Compiled, type CompiledMatch } from './match.ts';
import {
  routeKey,
  type BackendRef,
  type Filter,
  type GRPCRoute,
  type HTTPRoute,
  type HTTPRouteRule,
  type RouteMeta,
} from './objects.ts';

export type RouteKind = 'HTTPRoute' | 'GRPCRoute';

export interface CompiledRule {
  kind: RouteKind;
  /** "namespace/name" of the route. */
  route: string;
  index: number;
  filters: Filter[];
  backends: RouteBackend[];
  /** From the rule's `timeouts`; absent or 0 means none. */
  timeouts?: RuleTimeouts;
}

/** A rule's timeouts in ms: the whole request, and each attempt to a backend. */
export interface RuleTimeouts {
  requestMs?: number;
  backendRequestMs?: number;
}

export interface RuleMatches {
  rule: CompiledRule;
  matches: CompiledMatch[];
}

export type CompiledRules = { rules: RuleMatches[] } | { unsupported: string };

/**
 * One match of a rule, with what orders it among all: the match's rank, then the route's age,
 * namespace/name, the rule's index and the match's.
 */
export interface RankedMatch {
  match: CompiledMatch;
  rule: CompiledRule;
  order: readonly [string, string, number, number];
}

/** The spec's precedence: a smaller rank, then the oldest route, namespace/name, rule and match order. */
export function byPrecedence(a: RankedMatch, b: RankedMatch): number {
  const r = compareRanks(a.match.rank, b.match.rank);
  if (r !== 0) return r;
  for (let i = 0; i < a.order.length; i++) {
    const x = a.order[i]!;
    const y = b.order[i]!;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

/**
 * An HTTPRoute's rules compiled once, for a gateway's table and a sidecar's alike: matches, filters
 * (only those we apply), backendRefs resolved against ReferenceGrants (a gateway's routes; a
 * sidecar's need none), timeouts in milliseconds.
 * Anything unsupported rejects the whole route (UnsupportedValue), so nothing of it is served.
 */
export function compileRules(route: HTTPRoute, grants: CrossNamespace): CompiledRules {
  return compileWith(route, grants, compileMatch, FILTERS);
}

/** A GRPCRoute's rules, to the same model: its matches (grpc-match.ts), its two header filters. */
export function compileGrpcRules(route: GRPCRoute, grants: CrossNamespace): CompiledRules {
  return compileWith(route, grants, compileGrpcMatch, GRPC_FILTERS);
}

interface RuleSource<M> {
  matches: M[];
  filters: Filter[];
  backendRefs: BackendRef[];
  timeouts?: HTTPRouteRule['timeouts'];
}

function compileWith<M>(
  route: { kind: RouteKind; metadata: RouteMeta; spec: { rules: RuleSource<M>[] } },
  grants: CrossNamespace,
  compile: (m: M) => Compiled,
  supported: ReadonlySet<string>,
): CompiledRules {
  const key = routeKey(route.metadata);
  const rules: RuleMatches[] = [];
  for (const [index, r] of route.spec.rules.entries()) {
    const matches: CompiledMatch[] = [];
    for (const m of r.matches) {
      const c = compile(m);
      if ('unsupported' in c) return { unsupported: `rule ${index}: ${c.unsupported} is not supported` };
      matches.push(c.match);
    }
    const badFilter = [...r.filters, ...r.backendRefs.flatMap((b) => b.filters)].find(
      (f) => !supported.has(f.type),
    );
    if (badFilter) return { unsupported: `rule ${index}: filter ${badFilter.type} is not supported` };
    const backends = r.backendRefs.map((b) =>
      resolveBackend(b, route.metadata.namespace, grants, route.kind),
    );
    const timeouts = compileTimeouts(r.timeouts);
    if ('unsupported' in timeouts) return { unsupported: `rule ${index}: ${timeouts.unsupported}` };
    rules.push({
      rule: {
        kind: route.kind,
        route: key,
        index,
        filters: r.filters,
        backends,
        ...(timeouts.requestMs || timeouts.backendRequestMs ? { timeouts } : {}),
      },
      matches,
    });
  }
  return { rules };
}

function compileTimeouts(t: HTTPRouteRule['timeouts']): RuleTimeouts | { unsupported: string } {
  const out: RuleTimeouts = {};
  for (const [field, key] of [
    ['request', 'requestMs'],
    ['backendRequest', 'backendRequestMs'],
  ] as const) {
    const text = t?.[field];
    if (text === undefined) continue;
    const ms = parseDuration(text);
    if (ms === undefined)
      return { unsupported: `timeouts.${field} ${JSON.stringify(text)} is not a duration` };
    if (ms > 0) out[key] = ms;
  }
  return out;
}

/** The filters the gateway applies; any other makes the route UnsupportedValue. */
export const FILTERS: ReadonlySet<string> = new Set([
  'RequestHeaderModifier',
  'ResponseHeaderModifier',
  'RequestRedirect',
  'URLRewrite',
]);

/** GRPCRoute's header filters; RequestMirror and ExtensionRef make the route UnsupportedValue. */
const GRPC_FILTERS: ReadonlySet<string> = new Set(['RequestHeaderModifier', 'ResponseHeaderModifier']);
