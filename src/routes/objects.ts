/**
 * The slice of Gateway API (gateway.networking.k8s.io/v1, standard channel) objects that routing
 * reads: GatewayClass, Gateway, HTTPRoute, GRPCRoute and ReferenceGrant. Slimmed objects keep the API's JSON
 * shape (a subset of it, defaults filled in the way the CRDs' schemas default them), so a watch
 * event, a list item, a snapshot and a `kubectl get -o yaml` document decode the same way, and
 * slimming a slimmed object changes nothing.
 */

import { obj, str, num, arr, strMap } from '../shared/json.ts';
export const GATEWAY_GROUP = 'gateway.networking.k8s.io';

export interface RouteMeta {
  name: string;
  namespace: string;
  /** RFC 3339, as the API writes it; precedence ties between routes are settled by it. */
  creationTimestamp?: string;
  generation?: number;
}

/** A status condition as the API writes it. */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime?: string;
}

/**
 * Status as read, kept so that a writer can tell whether its status is already there (replicas
 * and restarts then write nothing) and keep other controllers' route parents.
 */
export interface ReadStatus {
  conditions?: Condition[];
  listeners?: unknown[];
  addresses?: unknown[];
  parents?: { controllerName?: string; parentRef?: unknown; conditions?: Condition[] }[];
}

export interface GatewayClass {
  kind: 'GatewayClass';
  metadata: RouteMeta;
  spec: { controllerName: string };
  status?: ReadStatus;
}

export interface ObjectRef {
  group: string;
  kind: string;
  name: string;
  namespace?: string;
}

export interface Listener {
  name: string;
  port: number;
  protocol: string;
  hostname?: string;
  tls?: { mode: string; certificateRefs: ObjectRef[] };
  allowedRoutes: {
    namespaces: { from: string; selector?: LabelSelector };
    kinds?: { group: string; kind: string }[];
  };
}

/** A metav1.LabelSelector. */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

/** A Namespace's labels (for allowedRoutes.namespaces.from: Selector). */
export interface NamespaceLabels {
  kind: 'Namespace';
  metadata: RouteMeta & { labels: Record<string, string> };
}

export function slimNamespace(raw: unknown): NamespaceLabels {
  const o = obj(raw);
  return { kind: 'Namespace', metadata: { ...slimMeta(o.metadata), labels: strMap(obj(o.metadata).labels) } };
}

export interface Gateway {
  kind: 'Gateway';
  metadata: RouteMeta;
  spec: { gatewayClassName: string; listeners: Listener[] };
  status?: ReadStatus;
}

export interface ParentRef {
  group: string;
  kind: string;
  name: string;
  namespace?: string;
  sectionName?: string;
  port?: number;
}

export interface PathMatch {
  type: string;
  value: string;
}

export interface ValueMatch {
  type: string;
  name: string;
  value: string;
}

export interface RouteMatch {
  path: PathMatch;
  headers: ValueMatch[];
  queryParams: ValueMatch[];
  method?: string;
}

export interface HeaderModifier {
  set: { name: string; value: string }[];
  add: { name: string; value: string }[];
  remove: string[];
}

export interface PathModifier {
  type: string;
  replaceFullPath?: string;
  replacePrefixMatch?: string;
}

export interface Redirect {
  scheme?: string;
  hostname?: string;
  path?: PathModifier;
  port?: number;
  statusCode: number;
}

export interface Rewrite {
  hostname?: string;
  path?: PathModifier;
}

/** One filter as the API writes it; `type` names the one field that is set. */
export interface Filter {
  type: string;
  requestHeaderModifier?: HeaderModifier;
  responseHeaderModifier?: HeaderModifier;
  requestRedirect?: Redirect;
  urlRewrite?: Rewrite;
}

export interface BackendRef extends ObjectRef {
  port?: number;
  weight: number;
  filters: Filter[];
}

export interface HTTPRouteRule {
  name?: string;
  matches: RouteMatch[];
  filters: Filter[];
  backendRefs: BackendRef[];
  timeouts?: { request?: string; backendRequest?: string };
}

export interface HTTPRoute {
  kind: 'HTTPRoute';
  metadata: RouteMeta;
  spec: { parentRefs: ParentRef[]; hostnames: string[]; rules: HTTPRouteRule[] };
  status?: ReadStatus;
}

/**
 * A GRPCRouteMatch's method: `type` Exact (the default) or RegularExpression; an empty service or
 * method is left out, as "any".
 */
export interface GRPCMethodMatch {
  type: string;
  service?: string;
  method?: string;
}

export interface GRPCRouteMatch {
  method?: GRPCMethodMatch;
  headers: ValueMatch[];
}

export interface GRPCRouteRule {
  name?: string;
  matches: GRPCRouteMatch[];
  filters: Filter[];
  backendRefs: BackendRef[];
}

export interface GRPCRoute {
  kind: 'GRPCRoute';
  metadata: RouteMeta;
  spec: { parentRefs: ParentRef[]; hostnames: string[]; rules: GRPCRouteRule[] };
  status?: ReadStatus;
}

export interface ReferenceGrant {
  kind: 'ReferenceGrant';
  metadata: RouteMeta;
  spec: {
    from: { group: string; kind: string; namespace: string }[];
    to: { group: string; kind: string; name?: string }[];
  };
}

const opt = <K extends string, V>(k: K, v: V | undefined): Partial<Record<K, V>> =>
  (v === undefined ? {} : { [k]: v }) as Partial<Record<K, V>>;

function slimMeta(raw: unknown, namespace = ''): RouteMeta {
  const m = obj(raw);
  return {
    name: str(m.name) ?? '',
    namespace: str(m.namespace) ?? namespace,
    ...opt('creationTimestamp', str(m.creationTimestamp)),
    ...opt('generation', num(m.generation)),
  };
}

function slimRef(raw: unknown, group: string, kind: string): ObjectRef {
  const r = obj(raw);
  return {
    group: str(r.group) ?? group,
    kind: str(r.kind) ?? kind,
    name: str(r.name) ?? '',
    ...opt('namespace', str(r.namespace)),
  };
}

function slimStatus(raw: unknown): ReadStatus | undefined {
  if (raw === undefined || raw === null) return undefined;
  const s = obj(raw);
  const out: ReadStatus = {};
  for (const k of ['conditions', 'listeners', 'addresses', 'parents'] as const) {
    if (Array.isArray(s[k])) (out as Record<string, unknown>)[k] = s[k];
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

export function slimGatewayClass(raw: unknown): GatewayClass {
  const o = obj(raw);
  return {
    kind: 'GatewayClass',
    metadata: slimMeta(o.metadata),
    spec: { controllerName: str(obj(o.spec).controllerName) ?? '' },
    ...opt('status', slimStatus(o.status)),
  };
}

function slimSelector(raw: unknown): LabelSelector | undefined {
  if (raw === undefined || raw === null) return undefined;
  const s = obj(raw);
  return {
    matchLabels: strMap(s.matchLabels),
    matchExpressions: arr(s.matchExpressions).map((e) => ({
      key: str(obj(e).key) ?? '',
      operator: str(obj(e).operator) ?? '',
      values: arr(obj(e).values).flatMap((v) => (typeof v === 'string' ? [v] : [])),
    })),
  };
}

/** Whether labels satisfy a selector (In, NotIn, Exists, DoesNotExist; an unknown operator never matches). */
export function selects(s: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(s.matchLabels ?? {})) if (labels[k] !== v) return false;
  return (s.matchExpressions ?? []).every((e) => {
    const has = Object.hasOwn(labels, e.key);
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        return has && values.includes(labels[e.key]!);
      case 'NotIn':
        return !has || !values.includes(labels[e.key]!);
      case 'Exists':
        return has;
      case 'DoesNotExist':
        return !has;
      default:
        return false;
    }
  });
}

function slimListener(raw: unknown): Listener {
  const l = obj(raw);
  const tls = obj(l.tls);
  const allowed = obj(l.allowedRoutes);
  const kinds = Array.isArray(allowed.kinds)
    ? allowed.kinds.map((k) => ({ group: str(obj(k).group) ?? GATEWAY_GROUP, kind: str(obj(k).kind) ?? '' }))
    : undefined;
  return {
    name: str(l.name) ?? '',
    port: num(l.port) ?? 0,
    protocol: str(l.protocol) ?? '',
    ...opt('hostname', str(l.hostname)?.toLowerCase()),
    ...(l.tls === undefined
      ? {}
      : {
          tls: {
            mode: str(tls.mode) ?? 'Terminate',
            certificateRefs: arr(tls.certificateRefs).map((r) => slimRef(r, '', 'Secret')),
          },
        }),
    allowedRoutes: {
      namespaces: {
        from: str(obj(allowed.namespaces).from) ?? 'Same',
        ...opt('selector', slimSelector(obj(allowed.namespaces).selector)),
      },
      ...opt('kinds', kinds),
    },
  };
}

export function slimGateway(raw: unknown, namespace?: string): Gateway {
  const o = obj(raw);
  const s = obj(o.spec);
  return {
    kind: 'Gateway',
    metadata: slimMeta(o.metadata, namespace),
    spec: { gatewayClassName: str(s.gatewayClassName) ?? '', listeners: arr(s.listeners).map(slimListener) },
    ...opt('status', slimStatus(o.status)),
  };
}

function slimValueMatches(raw: unknown): ValueMatch[] {
  return arr(raw).map((h) => {
    const m = obj(h);
    return { type: str(m.type) ?? 'Exact', name: str(m.name) ?? '', value: str(m.value) ?? '' };
  });
}

function slimMatch(raw: unknown): RouteMatch {
  const m = obj(raw);
  const p = obj(m.path);
  return {
    path: { type: str(p.type) ?? 'PathPrefix', value: str(p.value) ?? '/' },
    headers: slimValueMatches(m.headers),
    queryParams: slimValueMatches(m.queryParams),
    ...opt('method', str(m.method)),
  };
}

function slimPairs(raw: unknown): { name: string; value: string }[] {
  return arr(raw).map((h) => ({ name: str(obj(h).name) ?? '', value: str(obj(h).value) ?? '' }));
}

function slimHeaderModifier(raw: unknown): HeaderModifier | undefined {
  if (raw === undefined) return undefined;
  const m = obj(raw);
  return {
    set: slimPairs(m.set),
    add: slimPairs(m.add),
    remove: arr(m.remove).flatMap((r) => (typeof r === 'string' ? [r] : [])),
  };
}

function slimPathModifier(raw: unknown): PathModifier | undefined {
  if (raw === undefined) return undefined;
  const p = obj(raw);
  return {
    type: str(p.type) ?? '',
    ...opt('replaceFullPath', str(p.replaceFullPath)),
    ...opt('replacePrefixMatch', str(p.replacePrefixMatch)),
  };
}

function slimFilter(raw: unknown): Filter {
  const f = obj(raw);
  const redirect = f.requestRedirect === undefined ? undefined : obj(f.requestRedirect);
  const rewrite = f.urlRewrite === undefined ? undefined : obj(f.urlRewrite);
  return {
    type: str(f.type) ?? '',
    ...opt('requestHeaderModifier', slimHeaderModifier(f.requestHeaderModifier)),
    ...opt('responseHeaderModifier', slimHeaderModifier(f.responseHeaderModifier)),
    ...opt(
      'requestRedirect',
      redirect && {
        ...opt('scheme', str(redirect.scheme)),
        ...opt('hostname', str(redirect.hostname)),
        ...opt('path', slimPathModifier(redirect.path)),
        ...opt('port', num(redirect.port)),
        statusCode: num(redirect.statusCode) ?? 302,
      },
    ),
    ...opt(
      'urlRewrite',
      rewrite && {
        ...opt('hostname', str(rewrite.hostname)),
        ...opt('path', slimPathModifier(rewrite.path)),
      },
    ),
  };
}

function slimBackendRef(raw: unknown): BackendRef {
  const b = obj(raw);
  return {
    ...slimRef(b, '', 'Service'),
    ...opt('port', num(b.port)),
    weight: num(b.weight) ?? 1,
    filters: arr(b.filters).map(slimFilter),
  };
}

const DEFAULT_MATCH: RouteMatch = { path: { type: 'PathPrefix', value: '/' }, headers: [], queryParams: [] };

/** What rules of every route kind have; a rule without matches has `all`, which matches everything. */
function slimRuleCommon<M>(
  r: Record<string, unknown>,
  slimMatch: (raw: unknown) => M,
  all: M,
): { name?: string; matches: M[]; filters: Filter[]; backendRefs: BackendRef[] } {
  const matches = arr(r.matches).map(slimMatch);
  return {
    ...opt('name', str(r.name)),
    matches: matches.length > 0 ? matches : [all],
    filters: arr(r.filters).map(slimFilter),
    backendRefs: arr(r.backendRefs).map(slimBackendRef),
  };
}

function slimRule(raw: unknown): HTTPRouteRule {
  const r = obj(raw);
  const t = r.timeouts === undefined ? undefined : obj(r.timeouts);
  return {
    ...slimRuleCommon(r, slimMatch, DEFAULT_MATCH),
    ...opt(
      'timeouts',
      t && { ...opt('request', str(t.request)), ...opt('backendRequest', str(t.backendRequest)) },
    ),
  };
}

/** What every route kind's spec has: parentRefs (defaulting to a Gateway) and hostnames. */
function slimCommonSpec(s: Record<string, unknown>): { parentRefs: ParentRef[]; hostnames: string[] } {
  return {
    parentRefs: arr(s.parentRefs).map((p) => {
      const r = obj(p);
      return {
        ...slimRef(r, GATEWAY_GROUP, 'Gateway'),
        ...opt('sectionName', str(r.sectionName)),
        ...opt('port', num(r.port)),
      };
    }),
    hostnames: arr(s.hostnames).flatMap((h) => (typeof h === 'string' ? [h.toLowerCase()] : [])),
  };
}

/** A route's metadata and spec; a route without rules has the one an empty rule slims to. */
function slimRoute<K extends string, R>(
  kind: K,
  raw: unknown,
  namespace: string | undefined,
  slimRule: (raw: unknown) => R,
): {
  kind: K;
  metadata: RouteMeta;
  spec: { parentRefs: ParentRef[]; hostnames: string[]; rules: R[] };
  status?: ReadStatus;
} {
  const o = obj(raw);
  const s = obj(o.spec);
  const rules = arr(s.rules).map(slimRule);
  return {
    kind,
    metadata: slimMeta(o.metadata, namespace),
    spec: { ...slimCommonSpec(s), rules: rules.length > 0 ? rules : [slimRule({})] },
    ...opt('status', slimStatus(o.status)),
  };
}

export function slimHTTPRoute(raw: unknown, namespace?: string): HTTPRoute {
  return slimRoute('HTTPRoute', raw, namespace, slimRule);
}

function slimGRPCMatch(raw: unknown): GRPCRouteMatch {
  const m = obj(raw);
  const method = m.method === undefined || m.method === null ? undefined : obj(m.method);
  // An empty service or method means "any", as an absent one does.
  const named = (v: unknown): string | undefined => str(v) || undefined;
  return {
    ...opt(
      'method',
      method && {
        type: str(method.type) ?? 'Exact',
        ...opt('service', named(method.service)),
        ...opt('method', named(method.method)),
      },
    ),
    headers: slimValueMatches(m.headers),
  };
}

const MATCH_ALL_GRPC: GRPCRouteMatch = { headers: [] };

const slimGRPCRule = (raw: unknown): GRPCRouteRule => slimRuleCommon(obj(raw), slimGRPCMatch, MATCH_ALL_GRPC);

export function slimGRPCRoute(raw: unknown, namespace?: string): GRPCRoute {
  return slimRoute('GRPCRoute', raw, namespace, slimGRPCRule);
}

export function slimReferenceGrant(raw: unknown, namespace?: string): ReferenceGrant {
  const o = obj(raw);
  const s = obj(o.spec);
  return {
    kind: 'ReferenceGrant',
    metadata: slimMeta(o.metadata, namespace),
    spec: {
      from: arr(s.from).map((f) => ({
        group: str(obj(f).group) ?? '',
        kind: str(obj(f).kind) ?? '',
        namespace: str(obj(f).namespace) ?? '',
      })),
      to: arr(s.to).map((t) => ({
        group: str(obj(t).group) ?? '',
        kind: str(obj(t).kind) ?? '',
        ...opt('name', str(obj(t).name)),
      })),
    },
  };
}

export const routeKey = (m: RouteMeta): string => `${m.namespace}/${m.name}`;
