import { granted, type ServiceTarget } from './backends.ts';
import { intersect, lookupKeys, overlaps } from './hostnames.ts';
import type { CompiledMatch, RequestView } from './match.ts';
import {
  byPrecedence,
  compileGrpcRules,
  compileRules,
  type CompiledRule,
  type CompiledRules,
  type RankedMatch,
  type RouteKind,
  type RuleMatches,
} from './rules.ts';
import {
  GATEWAY_GROUP,
  routeKey,
  selects,
  type Condition,
  type Gateway,
  type GatewayClass,
  type GRPCRoute,
  type HTTPRoute,
  type Listener,
  type ParentRef,
  type ReferenceGrant,
} from './objects.ts';

/**
 * The Gateway API routing table of a gateway, built whole from the objects of the moment and
 * swapped atomically, like the Ingress table. Gateways of a GatewayClass whose controllerName is
 * ours; HTTPRoutes and GRPCRoutes attached to their listeners by parentRefs (sectionName, port),
 * allowedRoutes (namespaces Same, All or Selector; kinds) and hostname intersection. Of an
 * HTTPRoute and a GRPCRoute whose hostnames overlap on one listener, only the older (then the
 * first by namespace/name) is attached there, as the spec asks; the other is not Accepted.
 *
 * Every HTTP listener is served on the gateway's HTTP port and every HTTPS listener on its HTTPS
 * port; a request is matched against the routes of its scheme. A request that came to one
 * Gateway's own address (its Service) is matched against the routes of that Gateway's listeners on
 * that port only (lookupListener). Hosts are tried most specific
 * first (the exact name, then wildcards from the longest suffix, then routes without hostnames),
 * and within one the matches are ordered as the spec says: Exact path, longest prefix, method,
 * most headers, most query parameters, then the oldest route, then namespace/name, then rule and
 * match order. A less specific host's routes are tried when no route of a more specific one
 * matches; no match at all is a 404 (gRPC: UNIMPLEMENTED). Under one host, GRPCRoute matches are
 * tried before HTTPRoute ones (they can only meet there through two listeners or Gateways sharing
 * a port), as the sidecar orders the two kinds; a GRPCRoute matches on a call's path
 * (`/service/method`) and headers, not on its content-type.
 */
export type Scheme = 'http' | 'https';
export type { CompiledRule, RuleTimeouts } from './rules.ts';

export interface Selected {
  rule: CompiledRule;
  /** The PathPrefix that matched (for ReplacePrefixMatch). */
  prefix?: string;
  /** The port of the listener the route is attached to (for redirects). */
  listenerPort: number;
}

export type { Condition };

export interface RouteParentStatus {
  parentRef: ParentRef;
  conditions: Condition[];
}

export interface ListenerStatus {
  name: string;
  attachedRoutes: number;
  supportedKinds: { group: string; kind: string }[];
  conditions: Condition[];
}

export type GatewayRoute = HTTPRoute | GRPCRoute;

export interface TableInput {
  controller: string;
  classes: Iterable<GatewayClass>;
  gateways: Iterable<Gateway>;
  routes: Iterable<HTTPRoute>;
  grpcRoutes?: Iterable<GRPCRoute>;
  grants: Iterable<ReferenceGrant>;
  /** Namespace labels, for listeners that admit routes by a namespace selector. */
  namespaces?: ReadonlyMap<string, Readonly<Record<string, string>>>;
}

interface Entry extends RankedMatch {
  listenerPort: number;
}

const SUPPORTED: Record<string, Scheme> = { HTTP: 'http', HTTPS: 'https' };
/** The route kinds an HTTP or HTTPS listener takes, and admits when its allowedRoutes names none. */
const ROUTE_KINDS: readonly { group: string; kind: RouteKind }[] = [
  { group: GATEWAY_GROUP, kind: 'HTTPRoute' },
  { group: GATEWAY_GROUP, kind: 'GRPCRoute' },
];
type GroupKind = { group: string; kind: string };
const sameKind = (a: GroupKind, b: GroupKind): boolean => a.group === b.group && a.kind === b.kind;
const isRouteKind = (k: GroupKind): boolean => ROUTE_KINDS.some((r) => sameKind(r, k));
/** A route's key in the table's maps: the kind, then namespace/name (two kinds may share a name). */
const tableKey = (r: { kind: RouteKind; metadata: { namespace: string; name: string } }): string =>
  `${r.kind} ${routeKey(r.metadata)}`;
/** Under one host, GRPCRoute matches first, then by precedence. */
const byKindThenPrecedence = (a: Entry, b: Entry): number =>
  (a.rule.kind === b.rule.kind ? 0 : a.rule.kind === 'GRPCRoute' ? -1 : 1) || byPrecedence(a, b);

export const condition = (type: string, ok: boolean, reason: string, message = ''): Condition => ({
  type,
  status: ok ? 'True' : 'False',
  reason,
  message,
});

export class GatewayRouteTable {
  readonly #hosts = new Map<Scheme, Map<string, Entry[]>>([
    ['http', new Map()],
    ['https', new Map()],
  ]);
  readonly #classes = new Map<string, GatewayClass>();
  /** Routes with at least one parentRef naming one of our Gateways, by tableKey. */
  readonly #routes = new Map<string, GatewayRoute>();
  readonly #routeBackends = new Map<string, ServiceTarget[]>();
  readonly #gateways = new Map<string, Gateway>();
  /** Per listener ("namespace/name/listener"), the hostnames each attached route serves there. */
  readonly #listenerHosts = new Map<string, { kind: RouteKind; route: string; hostnames: string[] }[]>();
  readonly #routeStatus = new Map<string, RouteParentStatus[]>();
  readonly #grants: ReferenceGrant[];
  readonly #namespaces: ReadonlyMap<string, Readonly<Record<string, string>>>;
  /** HTTPS listener hostname ('' for none) -> "namespace/name" of its certificate's Secret. */
  readonly #certificates = new Map<string, string>();
  readonly #certificateRefs = new Set<string>();
  /** Per Gateway ("namespace/name") and listener port: hosts and their matches, as #hosts. */
  readonly #listeners = new Map<string, Map<string, Entry[]>>();
  /** Per index and host, the matches already indexed (a route through two listeners is one entry). */
  readonly #seen = new Map<string, Set<CompiledMatch>>();

  constructor(input: TableInput) {
    for (const c of input.classes)
      if (c.spec.controllerName === input.controller) this.#classes.set(c.metadata.name, c);
    for (const g of input.gateways) {
      if (this.#classes.has(g.spec.gatewayClassName)) this.#gateways.set(routeKey(g.metadata), g);
    }
    this.#grants = [...input.grants];
    this.#namespaces = input.namespaces ?? new Map();
    for (const g of this.#gateways.values()) this.#addCertificates(g);
    // Oldest first: of two routes of different kinds on one listener and host, the older wins.
    const routes: GatewayRoute[] = [...input.routes, ...(input.grpcRoutes ?? [])];
    routes.sort(byAge);
    for (const r of routes) this.#addRoute(r);
    for (const entries of [...this.#hosts.values(), ...this.#listeners.values()])
      for (const list of entries.values()) list.sort(byKindThenPrecedence);
  }

  /** Our GatewayClasses by name. */
  classes(): ReadonlyMap<string, GatewayClass> {
    return this.#classes;
  }

  /** The Services a route's rules name (for its ResolvedRefs), by tableKey. */
  backendsOf(route: string): ServiceTarget[] {
    return this.#routeBackends.get(route) ?? [];
  }

  /** The routes of both kinds that name one of our Gateways, by tableKey. */
  routes(): ReadonlyMap<string, GatewayRoute> {
    return this.#routes;
  }

  /** Every Service a served rule names, "namespace/name". */
  services(): Set<string> {
    const out = new Set<string>();
    for (const hosts of this.#hosts.values())
      for (const list of hosts.values())
        for (const e of list)
          for (const b of e.rule.backends)
            if ('target' in b) out.add(`${b.target.namespace}/${b.target.name}`);
    return out;
  }

  /** How many route-to-listener attachments there are, of one kind. */
  attachedRoutes(kind: RouteKind): number {
    let n = 0;
    for (const list of this.#listenerHosts.values()) n += list.filter((a) => a.kind === kind).length;
    return n;
  }

  /** Our Gateways by "namespace/name". */
  gateways(): ReadonlyMap<string, Gateway> {
    return this.#gateways;
  }

  /** Whether no route is served for a scheme (the Ingress-only gateway's case: nothing to match). */
  serves(scheme: Scheme): boolean {
    return this.#hosts.get(scheme)!.size > 0;
  }

  lookup(scheme: Scheme, host: string, req: RequestView): Selected | undefined {
    return find(this.#hosts.get(scheme)!, host, req);
  }

  /** A request that came to one Gateway's address on one of its listener ports. */
  lookupListener(gateway: string, port: number, host: string, req: RequestView): Selected | undefined {
    const hosts = this.#listeners.get(`${gateway} ${port}`);
    return hosts && find(hosts, host, req);
  }

  /** The certificate Secret for a TLS server name: the most specific HTTPS listener hostname. */
  tlsFor(serverName: string): string | undefined {
    for (const key of lookupKeys(serverName)) {
      const secret = this.#certificates.get(key);
      if (secret) return secret;
    }
    return undefined;
  }

  /**
   * Every Secret an HTTPS listener names and may use, "namespace/name": also those of listeners
   * whose hostname another listener serves first, whose status still depends on them.
   */
  tlsSecrets(): Set<string> {
    return new Set(this.#certificateRefs);
  }

  /** The status of every route that names one of our Gateways, per such parentRef, by tableKey. */
  routeStatus(): ReadonlyMap<string, RouteParentStatus[]> {
    return this.#routeStatus;
  }

  /**
   * Each listener's status. secretUsable says whether a certificate Secret ("namespace/name")
   * exists and holds a usable kubernetes.io/tls pair.
   */
  listenerStatus(gateway: string, secretUsable: (key: string) => boolean = () => true): ListenerStatus[] {
    const g = this.#gateways.get(gateway);
    if (!g) return [];
    return g.spec.listeners.map((l) => {
      const supported = SUPPORTED[l.protocol] !== undefined;
      const kinds = l.allowedRoutes.kinds ?? ROUTE_KINDS;
      const refs = !kinds.every(isRouteKind)
        ? condition('ResolvedRefs', false, 'InvalidRouteKinds', 'only HTTPRoute and GRPCRoute are supported')
        : (this.#certificateProblem(g, l, secretUsable) ?? condition('ResolvedRefs', true, 'ResolvedRefs'));
      const ok = supported && refs.status === 'True';
      return {
        name: l.name,
        attachedRoutes: this.#listenerHosts.get(`${gateway}/${l.name}`)?.length ?? 0,
        supportedKinds: supported ? ROUTE_KINDS.filter((r) => kinds.some((k) => sameKind(k, r))) : [],
        conditions: [
          supported
            ? condition('Accepted', true, 'Accepted')
            : condition('Accepted', false, 'UnsupportedProtocol', `protocol ${l.protocol} is not served`),
          condition('Programmed', ok, ok ? 'Programmed' : 'Invalid'),
          refs,
          condition('Conflicted', false, 'NoConflicts'),
        ],
      };
    });
  }

  /** Why an HTTPS listener's certificate cannot be served (ResolvedRefs False), or undefined. */
  #certificateProblem(g: Gateway, l: Listener, usable: (key: string) => boolean): Condition | undefined {
    if (l.protocol !== 'HTTPS') return undefined;
    const ref = l.tls?.certificateRefs[0];
    const invalid = (message: string): Condition =>
      condition('ResolvedRefs', false, 'InvalidCertificateRef', message);
    if (!ref) return invalid('an HTTPS listener needs a certificateRef');
    if (ref.group !== '' || ref.kind !== 'Secret')
      return invalid(`certificateRef kind ${ref.kind} is not a Secret`);
    const key = this.#certificateRef(g, l);
    if (!key) {
      return condition(
        'ResolvedRefs',
        false,
        'RefNotPermitted',
        `no ReferenceGrant allows Secret ${ref.namespace}/${ref.name}`,
      );
    }
    return usable(key) ? undefined : invalid(`Secret ${key} does not exist or holds no usable certificate`);
  }

  /**
   * The first certificateRef of each HTTPS listener: a Secret of the Gateway's namespace, or of
   * another one that a ReferenceGrant opens to Gateways of this one. Of two listeners with one
   * hostname, the first written serves.
   */
  #addCertificates(g: Gateway): void {
    for (const l of g.spec.listeners) {
      const ref = l.protocol === 'HTTPS' ? this.#certificateRef(g, l) : undefined;
      const host = l.hostname ?? '';
      if (ref) this.#certificateRefs.add(ref);
      if (ref && !this.#certificates.has(host)) this.#certificates.set(host, ref);
    }
  }

  #certificateRef(g: Gateway, l: Listener): string | undefined {
    const ref = l.tls?.certificateRefs[0];
    if (!ref || ref.group !== '' || ref.kind !== 'Secret') return undefined;
    const ns = ref.namespace ?? g.metadata.namespace;
    const from = { group: GATEWAY_GROUP, kind: 'Gateway', namespace: g.metadata.namespace };
    if (
      ns !== g.metadata.namespace &&
      !granted(this.#grants, from, { group: '', kind: 'Secret', namespace: ns, name: ref.name })
    )
      return undefined;
    return `${ns}/${ref.name}`;
  }

  #addRoute(route: GatewayRoute): void {
    const key = tableKey(route);
    const statuses: RouteParentStatus[] = [];
    const compiled =
      route.kind === 'GRPCRoute' ? compileGrpcRules(route, this.#grants) : compileRules(route, this.#grants);
    for (const parentRef of route.spec.parentRefs) {
      const gateway = this.#parentGateway(route, parentRef);
      if (!gateway) continue;
      const attach = this.#attach(route, gateway, parentRef);
      const unsupported = 'unsupported' in compiled ? compiled.unsupported : undefined;
      const accepted =
        unsupported !== undefined
          ? condition('Accepted', false, 'UnsupportedValue', unsupported)
          : attach.listeners.length > 0
            ? condition('Accepted', true, 'Accepted')
            : condition('Accepted', false, attach.reason, attach.message);
      statuses.push({ parentRef, conditions: [accepted, this.#resolvedRefs(compiled)] });
      if (accepted.status === 'False' || 'unsupported' in compiled) continue;
      for (const { listener, hostnames } of attach.listeners) {
        const lkey = `${routeKey(gateway.metadata)}/${listener.name}`;
        let attached = this.#listenerHosts.get(lkey);
        if (!attached) this.#listenerHosts.set(lkey, (attached = []));
        attached.push({ kind: route.kind, route: key, hostnames });
        this.#index(route, compiled.rules, listener, hostnames, routeKey(gateway.metadata));
      }
    }
    if (statuses.length === 0) return;
    this.#routeStatus.set(key, statuses);
    this.#routes.set(key, route);
    if ('rules' in compiled)
      this.#routeBackends.set(
        key,
        compiled.rules.flatMap(({ rule }) => rule.backends.flatMap((b) => ('target' in b ? [b.target] : []))),
      );
  }

  #parentGateway(route: GatewayRoute, ref: ParentRef): Gateway | undefined {
    if (ref.group !== GATEWAY_GROUP || ref.kind !== 'Gateway') return undefined;
    return this.#gateways.get(`${ref.namespace ?? route.metadata.namespace}/${ref.name}`);
  }

  #attach(
    route: GatewayRoute,
    gateway: Gateway,
    ref: ParentRef,
  ): { listeners: { listener: Listener; hostnames: string[] }[]; reason: string; message: string } {
    const named = gateway.spec.listeners.filter(
      (l) =>
        (ref.sectionName === undefined || l.name === ref.sectionName) &&
        (ref.port === undefined || l.port === ref.port),
    );
    if (named.length === 0) {
      return { listeners: [], reason: 'NoMatchingParent', message: 'no listener matches the parentRef' };
    }
    const allowed = named.filter((l) => SUPPORTED[l.protocol] && this.#allows(l, gateway, route));
    if (allowed.length === 0) {
      return { listeners: [], reason: 'NotAllowedByListeners', message: 'no listener allows this route' };
    }
    const intersecting = allowed.flatMap((listener) => {
      const hostnames = intersect(listener.hostname, route.spec.hostnames);
      return hostnames.length > 0 ? [{ listener, hostnames }] : [];
    });
    if (intersecting.length === 0) {
      return {
        listeners: [],
        reason: 'NoMatchingListenerHostname',
        message: 'no listener hostname intersects the route',
      };
    }
    const gw = routeKey(gateway.metadata);
    const conflicts = intersecting.map(({ listener, hostnames }) =>
      this.#listenerHosts
        .get(`${gw}/${listener.name}`)
        ?.find(
          (a) => a.kind !== route.kind && hostnames.some((h) => a.hostnames.some((o) => overlaps(h, o))),
        ),
    );
    const listeners = intersecting.filter((_, i) => conflicts[i] === undefined);
    const older = conflicts.find((c) => c !== undefined);
    return {
      listeners,
      reason: 'NotAllowedByListeners',
      message: `its hostnames overlap those of ${older?.route ?? ''}, which is older, on every listener`,
    };
  }

  #allows(l: Listener, gateway: Gateway, route: GatewayRoute): boolean {
    const kinds = l.allowedRoutes.kinds ?? ROUTE_KINDS;
    if (!kinds.some((k) => sameKind(k, { group: GATEWAY_GROUP, kind: route.kind }))) return false;
    const { from, selector } = l.allowedRoutes.namespaces;
    if (from === 'Selector') {
      const labels = this.#namespaces.get(route.metadata.namespace);
      // A namespace whose labels are not known is not admitted rather than guessed at.
      return selector !== undefined && labels !== undefined && selects(selector, labels);
    }
    return from === 'All' || (from === 'Same' && route.metadata.namespace === gateway.metadata.namespace);
  }

  #resolvedRefs(compiled: CompiledRules): Condition {
    if ('unsupported' in compiled) return condition('ResolvedRefs', true, 'ResolvedRefs');
    for (const { rule } of compiled.rules) {
      for (const b of rule.backends)
        if ('invalid' in b) return condition('ResolvedRefs', false, b.invalid.reason, b.invalid.message);
    }
    return condition('ResolvedRefs', true, 'ResolvedRefs');
  }

  #index(
    route: GatewayRoute,
    rules: RuleMatches[],
    listener: Listener,
    hostnames: string[],
    gateway: string,
  ): void {
    const scheme = SUPPORTED[listener.protocol]!;
    const own = `${gateway} ${listener.port}`;
    let byListener = this.#listeners.get(own);
    if (!byListener) this.#listeners.set(own, (byListener = new Map<string, Entry[]>()));
    const order = { created: route.metadata.creationTimestamp ?? '', name: routeKey(route.metadata) };
    this.#indexInto(this.#hosts.get(scheme)!, scheme, rules, listener.port, hostnames, order);
    this.#indexInto(byListener, own, rules, listener.port, hostnames, order);
  }

  #indexInto(
    hosts: Map<string, Entry[]>,
    index: string,
    rules: RuleMatches[],
    listenerPort: number,
    hostnames: string[],
    o: { created: string; name: string },
  ): void {
    for (const host of hostnames) {
      let list = hosts.get(host);
      if (!list) hosts.set(host, (list = []));
      const seenKey = `${index} ${host}`;
      let seen = this.#seen.get(seenKey);
      if (!seen) this.#seen.set(seenKey, (seen = new Set()));
      for (const { rule, matches } of rules) {
        for (const [m, match] of matches.entries()) {
          if (seen.has(match)) continue;
          seen.add(match);
          list.push({ match, rule, listenerPort, order: [o.created, o.name, rule.index, m] });
        }
      }
    }
  }
}

function find(hosts: ReadonlyMap<string, Entry[]>, host: string, req: RequestView): Selected | undefined {
  for (const key of lookupKeys(host)) {
    const hit = hosts.get(key)?.find((e) => e.match.test(req));
    if (hit) {
      return {
        rule: hit.rule,
        listenerPort: hit.listenerPort,
        ...(hit.match.prefix === undefined ? {} : { prefix: hit.match.prefix }),
      };
    }
  }
  return undefined;
}

/** Oldest first, then by namespace/name: the order in which a cross-kind hostname conflict is settled. */
function byAge(a: GatewayRoute, b: GatewayRoute): number {
  const age = (r: GatewayRoute): string => `${r.metadata.creationTimestamp ?? ''} ${routeKey(r.metadata)}`;
  const [x, y] = [age(a), age(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}
