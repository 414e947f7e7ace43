import { isIP } from 'node:net';
import type { Balancers, Outcome, ServiceBalancer } from '../balance/balancer.ts';
import { MESH_PORT_NAME } from '../config/options.ts';
import type { ServiceInfo } from '../discovery/types.ts';
import type { AffinityTable } from '../routing/affinity.ts';
import type { Destination as RouteDestination, Route, Router } from '../routing/router.ts';
import type { Destination } from './capture-port.ts';
import type { EgressRoutes } from './egress-routes.ts';
import { isOwnDestination, isOwnDestinationNow } from './loop.ts';
import type { ForwardPlan, Upstream } from './forward.ts';
import type { ProxyErrorCode } from './status.ts';

/**
 * Decides where one egress request or stream goes: a balanced
 * endpoint of a cluster Service, or a passthrough to the original destination (transparent) or the
 * resolved host (explicit), or a proxy error.
 */
export interface EgressPolicy {
  router: Router;
  balancers: Balancers;
  affinity: AffinityTable;
  egressPolicy: 'allow-all' | 'cluster-only';
  /**
   * The ports of our own listeners that egress must never connect to on this host: egress and
   * admin. The ingress listener is not among them: it delivers to the app and never back to
   * egress, so a pod may reach itself through it (a Service that targets the ingress port).
   */
  ownPorts: ReadonlySet<number>;
  retryStatuses: ReadonlySet<number>;
  maxAttempts: number;
  onConnectError?: (service: string) => void;
  /** HTTPRoutes attached to Services (GAMMA), for HTTP/1.1 requests and h2 streams alike. */
  routes?: EgressRoutes;
}

export type Decision =
  | { kind: 'error'; code: ProxyErrorCode; detail: string; service?: string; stale?: boolean }
  | (ForwardPlan & {
      kind: 'plan';
      service?: string;
      stale: boolean;
      passthrough: boolean;
      /** The Service port's appProtocol (Service or EndpointSlice), e.g. kubernetes.io/h2c. */
      appProtocol?: string;
    });

const loop = (host: string, port: number): Decision => ({
  kind: 'error',
  code: 'loop_detected',
  detail: `refusing to proxy to the sidecar's own listener ${host}:${port}`,
});

export async function decide(
  policy: EgressPolicy,
  dest: RouteDestination,
  original: Destination | undefined,
  client: string,
): Promise<Decision> {
  const now = decideNow(policy, dest, original, client);
  if (now) return now;
  // The slow path: a name on one of our own ports to look up, or discovery to wait for.
  const port = dest.port ?? dest.defaultPort;
  if (await isOwnDestination(dest.host, port, policy.ownPorts)) return loop(dest.host, port);
  const route = await policy.router.route(dest);
  const looked = new Map([[`${dest.host}:${port}`, false]]);
  if (route.kind === 'passthrough')
    looked.set(
      `${route.host}:${route.port}`,
      await isOwnDestination(route.host, route.port, policy.ownPorts),
    );
  // Every answer decideWith() can ask for is now known.
  return decideWith(policy, dest, original, client, route, looked)!;
}

/**
 * decide() for the request path, without a promise: undefined when the decision needs a DNS
 * lookup or has to wait for discovery.
 */
export function decideNow(
  policy: EgressPolicy,
  dest: RouteDestination,
  original: Destination | undefined,
  client: string,
): Decision | undefined {
  const port = dest.port ?? dest.defaultPort;
  const own = isOwnDestinationNow(dest.host, port, policy.ownPorts);
  if (own !== false) return own ? loop(dest.host, port) : undefined;
  const route = policy.router.routeNow(dest);
  return route && decideWith(policy, dest, original, client, route, NOTHING_LOOKED_UP);
}

const NOTHING_LOOKED_UP: ReadonlyMap<string, boolean> = new Map();

/** Whether host:port is one of ours, from the address itself or a lookup already made. */
function ownNow(
  policy: EgressPolicy,
  looked: ReadonlyMap<string, boolean>,
  host: string,
  port: number,
): boolean | undefined {
  return isOwnDestinationNow(host, port, policy.ownPorts) ?? looked.get(`${host}:${port}`);
}

/** The decision once the route is known; undefined when an own-port name was not looked up. */
function decideWith(
  policy: EgressPolicy,
  dest: RouteDestination,
  original: Destination | undefined,
  client: string,
  route: Route,
  looked: ReadonlyMap<string, boolean>,
): Decision | undefined {
  if (route.kind === 'passthrough') {
    if (policy.egressPolicy === 'cluster-only')
      return {
        kind: 'error',
        code: 'egress_denied',
        detail: `${dest.host}:${dest.port ?? dest.defaultPort} is not a cluster Service (${route.reason}) and the egress policy is cluster-only`,
      };
    const target =
      original && route.reason !== 'external_name' ? original : { address: route.host, port: route.port };
    const isOwn = ownNow(policy, looked, target.address, target.port);
    if (isOwn === undefined) return undefined;
    return isOwn ? loop(target.address, target.port) : single(policy, target, route.serviceKey);
  }
  const { serviceKey, endpoints, service, port: servicePort } = route;
  if (endpoints.length === 0)
    return {
      kind: 'error',
      code: 'no_endpoints',
      detail:
        route.localTo === undefined
          ? `service ${serviceKey} has no ready endpoints`
          : `service ${serviceKey} has no ready endpoints on node ${route.localTo} (internalTrafficPolicy: Local)`,
      service: serviceKey,
      stale: route.stale,
    };
  const { byId, ids } = indexed(endpoints, service);
  const balancer = policy.balancers.routed(serviceKey, ids);
  // Last-known-good rule 4: stale endpoints that all keep failing give way to the cluster's own path.
  if (route.stale && original && balancer.allEjected(ids))
    return ownNow(policy, looked, original.address, original.port)
      ? loop(original.address, original.port)
      : single(policy, original, serviceKey, route.stale);
  const affinity = service.sessionAffinity === 'ClientIP';
  // Without session affinity a plan holds nothing of the request: one serves every request
  // until the endpoints, the balancer or the staleness change.
  if (!affinity)
    return sharedPlan(policy, byId, ids, balancer, serviceKey, route.stale, servicePort.appProtocol);
  const timeout = service.affinityTimeoutSeconds;
  const next = (tried: ReadonlySet<string>): Upstream | undefined => {
    if (tried.size === 0) {
      const bound = policy.affinity.lookup(
        serviceKey,
        client,
        timeout,
        (id) => byId.has(id) && !balancer.isEjected(id),
      );
      if (bound) return byId.get(bound);
    }
    const id = balancer.pick(ids, tried);
    if (id === undefined) return undefined;
    policy.affinity.bind(serviceKey, client, id);
    return byId.get(id);
  };
  return balancedPlan(policy, balancer, serviceKey, ids, route.stale, servicePort.appProtocol, next);
}

function balancedPlan(
  policy: EgressPolicy,
  balancer: ServiceBalancer,
  service: string,
  ids: readonly string[],
  stale: boolean,
  appProtocol: string | undefined,
  next: ForwardPlan['next'],
): Decision {
  return {
    kind: 'plan',
    service,
    stale,
    passthrough: false,
    ...(appProtocol ? { appProtocol } : {}),
    next,
    ...balancedAttempts(balancer, service, ids, policy),
  };
}

type EndpointList = readonly { address: string; port: number }[];

interface SharedPlan {
  policy: EgressPolicy;
  balancer: ServiceBalancer;
  stale: boolean;
  appProtocol: string | undefined;
  plan: Decision;
}

/** Keyed by an index's ids: one per endpoint list, as the plan. */
const sharedPlans = new WeakMap<readonly string[], SharedPlan>();

function sharedPlan(
  policy: EgressPolicy,
  byId: EndpointIndex['byId'],
  ids: EndpointIndex['ids'],
  balancer: ServiceBalancer,
  service: string,
  stale: boolean,
  appProtocol: string | undefined,
): Decision {
  const have = sharedPlans.get(ids);
  if (
    have?.policy === policy &&
    have.balancer === balancer &&
    have.stale === stale &&
    have.appProtocol === appProtocol
  )
    return have.plan;
  const next = (tried: ReadonlySet<string>): Upstream | undefined => {
    const id = balancer.pick(ids, tried);
    return id === undefined ? undefined : byId.get(id);
  };
  const plan = balancedPlan(policy, balancer, service, ids, stale, appProtocol, next);
  sharedPlans.set(ids, { policy, balancer, stale, appProtocol, plan });
  return plan;
}

/** What every balanced plan shares: balancer feedback, the attempt limits and the retry budget. */
export function balancedAttempts(
  balancer: ServiceBalancer,
  service: string,
  ids: readonly string[],
  policy: Pick<EgressPolicy, 'retryStatuses' | 'maxAttempts' | 'onConnectError'>,
): Omit<ForwardPlan, 'next'> {
  return {
    canTry: (tried) => ids.some((id) => !tried.has(id)),
    start: (up) => {
      const done = balancer.start(up.id);
      const end = (outcome: Outcome): void => {
        if (outcome === 'connect_failure') policy.onConnectError?.(service);
        done(outcome);
      };
      return done.ready ? Object.assign(end, { ready: done.ready }) : end;
    },
    retryStatuses: policy.retryStatuses,
    maxAttempts: policy.maxAttempts,
    budget: balancer.budget,
  };
}

interface EndpointIndex {
  byId: ReadonlyMap<string, Upstream>;
  ids: readonly string[];
  service: ServiceInfo;
}

/**
 * The upstreams of an endpoint list, built once per list: discovery hands out the same array until
 * the Service's endpoints change, so a request does not rebuild them. A list belongs to one
 * Service, whose namespace a meshed endpoint's identity must be of, and whose mesh port says
 * which endpoints are meshed.
 */
const indexes = new WeakMap<EndpointList, EndpointIndex>();

export function indexed(endpoints: EndpointList, service: ServiceInfo): EndpointIndex {
  let index = indexes.get(endpoints);
  if (index?.service !== service) {
    const namespace = service.key.namespace;
    const meshed = meshedAddresses(service);
    const byId = new Map<string, Upstream>();
    for (const e of endpoints) {
      const id = endpointId(e.address, e.port);
      const up: Upstream = { id, host: e.address, port: e.port, namespace, poolKey: `${id} ${namespace}` };
      if (meshed) {
        up.meshed = meshed.has(e.address);
        up.poolKey += up.meshed ? ' mtls' : ' plain';
      }
      byId.set(up.id, up);
    }
    index = { byId, ids: [...byId.keys()], service };
    indexes.set(endpoints, index);
  }
  return index;
}

/**
 * The addresses of a Service's endpoints that run a mesh listener, when the Service says so: a
 * Service port named like the sidecar's mesh port, targeting that named port, is resolved by the
 * EndpointSlice controller for each pod, so it lists exactly the pods that have the port (the
 * injected ones). Decided by the control plane, never by how a connection attempt fails.
 * Nothing is known (undefined) without such a port, or when it lists no endpoint at all: a
 * targetPort that names no port, or a controller too old to resolve a native sidecar's port,
 * must not turn every endpoint into a plaintext one.
 */
export function meshedAddresses(service: ServiceInfo): ReadonlySet<string> | undefined {
  const listed = service.endpoints.get(MESH_PORT_NAME);
  if (!listed?.length || !service.ports.some((p) => p.name === MESH_PORT_NAME)) return undefined;
  return new Set(listed.map((e) => e.address));
}

/**
 * The cluster's own path to one destination, in plaintext without trying the mesh port: the
 * address may be a ClusterIP, whose Service port kube-proxy translates to the pod's, so a mesh
 * listener reached through it would be told the Service port instead of the app's; or a host
 * outside the cluster, which may drop packets to the mesh port until the connect times out.
 */
function single(policy: EgressPolicy, target: Destination, service?: string, stale = false): Decision {
  const id = endpointId(target.address, target.port);
  const up: Upstream = { id, host: target.address, port: target.port, meshed: false, poolKey: `${id} plain` };
  return {
    kind: 'plan',
    ...(service ? { service } : {}),
    stale,
    passthrough: true,
    next: (tried) => (tried.has(up.id) ? undefined : up),
    canTry: (tried) => !tried.has(up.id),
    start: () => (outcome) => {
      if (outcome === 'connect_failure') policy.onConnectError?.(service ?? '');
    },
    retryStatuses: new Set(),
    maxAttempts: 1,
  };
}

export const endpointId = (address: string, port: number): string =>
  isIP(address) === 6 ? `[${address}]:${port}` : `${address}:${port}`;
