import { httpRouteAction, requestView } from '../routes/action.ts';
import type { Headers } from '../routes/filters.ts';
import type { MeshRouteTable } from '../routes/mesh.ts';
import { normalisePath } from '../routes/path.ts';
import type { Destination } from '../routing/router.ts';
import { decide, decideNow, type Decision, type EgressPolicy } from './egress-plan.ts';
import type { ForwardPlan } from './forward.ts';
import { GrpcStatus } from './h2/grpc.ts';
import type { ProxyErrorCode } from './status.ts';

/** The HTTPRoutes a sidecar applies to its app's calls to Services (GAMMA). */
export interface EgressRoutes {
  table(): MeshRouteTable;
  /** The caller's namespace, whose consumer routes apply before the Service's own. */
  namespace: string;
  clusterDomain: string;
  /** Weighted backendRefs are drawn with it. */
  random: () => number;
}

/** What routes read of a call: HTTP/1.1's request, or an h2 stream's pseudo-headers as method and url. */
export interface CallView {
  method?: string | undefined;
  url?: string | undefined;
  headers: Headers;
}

/** A call's decision once routes have had their say: a route's request edit, or its redirect. */
export type Routed =
  | (Extract<Decision, { kind: 'error' }> & Pick<RouteError, 'grpcStatus'>)
  | (Extract<Decision, { kind: 'plan' }> & {
      edit?: (req: { url?: string | undefined; headers: Headers }) => void;
    })
  | { kind: 'redirect'; status: number; location: string };

/**
 * The decision for the Service a call names, or, when a route attached to it applies, for the
 * backend the route draws (decided like any call to that Service), with the route's edits and
 * timeouts. Synchronous when discovery knows both Services.
 */
export function applyRoutes(
  policy: EgressPolicy,
  call: CallView,
  dest: Destination,
  d: Decision,
  client: string,
): Routed | Promise<Routed> {
  const routes = policy.routes;
  if (!routes || d.kind !== 'plan' || d.passthrough || d.service === undefined) return d;
  const step = routeCall(routes, d.service, dest.port ?? dest.defaultPort, call);
  if (step.kind === 'as_is') return d;
  if (step.kind === 'redirect') return step;
  if (step.kind === 'error') return { ...step, service: d.service };
  const { dest: to, edit, kind: _, ...limits } = step;
  const withRoute = (b: Decision): Routed => (b.kind === 'plan' ? { ...b, ...limits, edit } : b);
  const now = decideNow(policy, to, undefined, client);
  return now ? withRoute(now) : decide(policy, to, undefined, client).then(withRoute);
}

/** A call a route refuses; grpcStatus, when set, is a gRPC call's status instead of the code's. */
interface RouteError {
  kind: 'error';
  code: ProxyErrorCode;
  detail: string;
  grpcStatus?: number;
}

/** What a route makes of a call to a Service port. */
export type RouteStep =
  /** No route applies: the call goes to the Service as it would without routes. */
  | { kind: 'as_is' }
  | RouteError
  | { kind: 'redirect'; status: number; location: string }
  | ({
      kind: 'routed';
      /** The backendRef drawn: a Service port, by its cluster name. */
      dest: Destination;
      /** Applied to the request after the sidecar's own header handling. */
      edit: (req: { url?: string | undefined; headers: Headers }) => void;
    } & Pick<ForwardPlan, 'editResponse' | 'requestTimeoutMs' | 'attemptTimeoutMs'>);

const AS_IS: RouteStep = { kind: 'as_is' };

/**
 * A call to Service `service` ("namespace/name") on `port`: the consumer routes of the caller's
 * namespace, else the Service's producer routes; the first match by the spec's precedence, its
 * filters, one backendRef by weight, its timeouts. Routes apply, and none matches: 404 no_route
 * (a gRPC call's UNIMPLEMENTED).
 * Matches read the path normalised as the gateway does (RFC 3986), and the backend gets that path.
 */
export function routeCall(routes: EgressRoutes, service: string, port: number, req: CallView): RouteStep {
  const table = routes.table();
  if (table.empty) return AS_IS;
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const n = normalisePath(q < 0 ? url : url.slice(0, q));
  if ('error' in n) return { kind: 'error', code: 'bad_request', detail: n.error };
  const found = table.lookup(service, port, routes.namespace, requestView(req, n.path));
  if (found.kind === 'none') return AS_IS;
  if (found.kind === 'no_match')
    return {
      kind: 'error',
      code: 'no_route',
      detail: `no ${found.routes} rule for ${service} matches ${n.path}`,
    };
  const host = String(req.headers.host ?? '').replace(/:\d+$/, '');
  const action = httpRouteAction(
    { rule: found.rule, listenerPort: port, ...(found.prefix === undefined ? {} : { prefix: found.prefix }) },
    { scheme: 'http', host, path: n.path, search: q < 0 ? '' : url.slice(q) },
    routes.random,
  );
  if (action.kind === 'redirect') return action;
  if (action.kind === 'invalid')
    return {
      kind: 'error',
      code: 'route_backend_invalid',
      detail: action.detail,
      // GRPCRoute's spec: a call drawn to an invalid backend is UNAVAILABLE (HTTPRoute's 500 is INTERNAL).
      ...(found.rule.kind === 'GRPCRoute' ? { grpcStatus: GrpcStatus.UNAVAILABLE } : {}),
    };
  const b = action.backend;
  return {
    kind: 'routed',
    dest: {
      host: `${b.name}.${b.namespace}.svc.${routes.clusterDomain}`,
      port: b.port.number,
      defaultPort: b.port.number,
    },
    edit: (r) => {
      r.url = n.path + (q < 0 ? '' : url.slice(q));
      action.editRequest(r);
    },
    ...(action.editResponse ? { editResponse: action.editResponse } : {}),
    ...(action.timeouts?.requestMs ? { requestTimeoutMs: action.timeouts.requestMs } : {}),
    ...(action.timeouts?.backendRequestMs ? { attemptTimeoutMs: action.timeouts.backendRequestMs } : {}),
  };
}
