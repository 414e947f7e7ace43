import { isIP } from 'node:net';
import type { Endpoint, Resolution, Resolver, ServiceInfo, ServicePort } from '../discovery/types.ts';
import { keyString } from '../discovery/types.ts';
import { parseServiceName, type ServiceName } from './authority.ts';

/**
 * Turns a destination (a name from the authority, or the original destination's IP) into either a
 * cluster Service with its usable endpoints, or a passthrough to the cluster's own L4 path.
 */
export type Route =
  | {
      kind: 'service';
      service: ServiceInfo;
      /** "ns/name", the metrics and span label. */
      serviceKey: string;
      port: ServicePort;
      /** Empty means "known Service, zero ready endpoints" (the proxy answers 503). */
      endpoints: Endpoint[];
      stale: boolean;
      /** Set when internalTrafficPolicy: Local narrowed the endpoints to this node's. */
      localTo?: string;
    }
  | {
      kind: 'passthrough';
      host: string;
      port: number;
      /** not_a_service: absent or not a Service name; no_discovery_data: never had data for it. */
      reason: 'not_a_service' | 'no_discovery_data' | 'external_name' | 'unknown_port';
      serviceKey?: string;
    };

export interface RouterOptions {
  resolver: Resolver;
  namespace: string;
  clusterDomain: string;
  /** How long a first lookup waits for discovery before passing through. */
  waitMs: number;
  /**
   * The node this sidecar runs on (downward API). With it, a Service with internalTrafficPolicy:
   * Local routes to this node's endpoints only, as kube-proxy and Istio do; without it (a sidecar
   * not started by the injector) the policy cannot be applied and all endpoints are used.
   */
  nodeName?: string;
  /** This sidecar's zone, for topology-aware routing (EndpointSlice zone hints). */
  zone?: string;
}

export interface Destination {
  host: string;
  /** Absent when the authority had no port: the scheme's default port is used. */
  port?: number;
  defaultPort: number;
}

export class Router {
  readonly #o: RouterOptions;

  /** Service names by host, parsed once: the request path sees the same few hosts again and again. */
  readonly #names = new Map<string, ServiceName | null>();
  /** The endpoint list each (list, filter) gives, kept so that a list's index is built once. */
  readonly #narrowed = new WeakMap<Endpoint[], Map<string, Endpoint[]>>();
  /** Routes by ServiceInfo and port, fresh and stale (only for names without an endpoint hostname). */
  readonly #routes = new WeakMap<ServiceInfo, Map<number, [Route?, Route?]>>();

  constructor(o: RouterOptions) {
    this.#o = o;
  }

  async route(dest: Destination): Promise<Route> {
    const name = this.#name(dest.host);
    if (!name) return pass(dest, 'not_a_service');
    const res = await this.#o.resolver.resolve(name.key, { waitMs: this.#o.waitMs });
    return this.#routeTo(dest, name, res);
  }

  /**
   * route() when discovery can answer at once (the Service is known, or the host is no Service
   * name); undefined when route() would wait for discovery.
   */
  routeNow(dest: Destination): Route | undefined {
    const name = this.#name(dest.host);
    if (!name) return pass(dest, 'not_a_service');
    const res = this.#o.resolver.resolveNow(name.key);
    return res && this.#routeTo(dest, name, res);
  }

  #name(host: string): ServiceName | undefined {
    if (isIP(host) !== 0) {
      const key = this.#o.resolver.byClusterIP(host);
      return key && { key };
    }
    let name = this.#names.get(host);
    if (name === undefined) {
      name = parseServiceName(host, this.#o.namespace, this.#o.clusterDomain) ?? null;
      // Hosts are chosen by clients: the memo is bounded, and starting over is cheap.
      if (this.#names.size >= 4_096) this.#names.clear();
      this.#names.set(host, name);
    }
    return name ?? undefined;
  }

  #routeTo(dest: Destination, name: ServiceName, res: Resolution): Route {
    if (res.kind === 'absent') return pass(dest, 'not_a_service');
    if (res.kind === 'unknown') return pass(dest, 'no_discovery_data');
    if (name.hostname !== undefined) return this.#serviceRoute(dest, name, res);
    // The same Service, port and staleness give the same route: kept per ServiceInfo, which
    // discovery replaces whenever the Service or its endpoints change.
    const port = dest.port ?? dest.defaultPort;
    const stale = res.freshness.state === 'stale' ? 1 : 0;
    let byPort = this.#routes.get(res.service);
    if (!byPort) this.#routes.set(res.service, (byPort = new Map<number, [Route?, Route?]>()));
    let pair = byPort.get(port);
    if (!pair) byPort.set(port, (pair = [undefined, undefined]));
    const cached = pair[stale];
    if (cached) return cached;
    const route = this.#serviceRoute(dest, name, res);
    // A passthrough for an unknown port carries the request's own host: not shared.
    if (route.kind === 'service' || route.reason === 'external_name') pair[stale] = route;
    return route;
  }

  #serviceRoute(dest: Destination, name: ServiceName, res: Extract<Resolution, { kind: 'found' }>): Route {
    const port = dest.port ?? dest.defaultPort;
    const service = res.service;
    const serviceKey = keyString(service.key);
    if (service.type === 'ExternalName' && service.externalName)
      return { kind: 'passthrough', host: service.externalName, port, reason: 'external_name', serviceKey };
    const sp = service.ports.find((p) => p.port === port && p.protocol === 'TCP');
    if (!sp) return pass(dest, 'unknown_port', serviceKey);
    const node = service.internalTrafficPolicy === 'Local' ? this.#o.nodeName : undefined;
    const endpoints = this.#endpoints(service.endpoints.get(sp.name) ?? NONE, name.hostname, node);
    return {
      kind: 'service',
      service,
      serviceKey,
      port: sp,
      endpoints,
      stale: res.freshness.state === 'stale',
      ...(node !== undefined ? { localTo: node } : {}),
    };
  }

  /** The endpoints a request may use, the same array for the same list and filter. */
  #endpoints(all: Endpoint[], hostname: string | undefined, node: string | undefined): Endpoint[] {
    const zone = node === undefined ? this.#o.zone : undefined;
    if (hostname === undefined && node === undefined && zone === undefined) return all;
    const filter = `${hostname ?? ''}\u0000${node ?? ''}\u0000${zone ?? ''}`;
    let byFilter = this.#narrowed.get(all);
    if (!byFilter) this.#narrowed.set(all, (byFilter = new Map<string, Endpoint[]>()));
    let narrowed = byFilter.get(filter);
    if (!narrowed) {
      narrowed = hostname === undefined ? all : all.filter((e) => e.hostname?.toLowerCase() === hostname);
      // No failover to other nodes: the Service asked for node-local traffic or none (KEP-2086).
      narrowed = node !== undefined ? narrowed.filter((e) => e.nodeName === node) : inZone(narrowed, zone);
      byFilter.set(filter, narrowed);
    }
    return narrowed;
  }
}

const NONE: Endpoint[] = [];

function pass(
  dest: Destination,
  reason: Extract<Route, { kind: 'passthrough' }>['reason'],
  serviceKey?: string,
): Route {
  return {
    kind: 'passthrough',
    host: dest.host,
    port: dest.port ?? dest.defaultPort,
    reason,
    ...(serviceKey ? { serviceKey } : {}),
  };
}

/**
 * Topology-aware routing as kube-proxy does it (KEP-2433, pkg/proxy/topology.go): only when every
 * ready endpoint carries zone hints and at least one is hinted for this zone are the endpoints
 * narrowed to those; otherwise all of them are used. The EndpointSlice controller sets hints only
 * for Services that ask (`service.kubernetes.io/topology-mode: Auto` or `trafficDistribution:
 * PreferClose`) and removes them when a zone lacks capacity, so this follows its decision.
 */
export function inZone(endpoints: Endpoint[], zone: string | undefined): Endpoint[] {
  if (zone === undefined) return endpoints;
  const ready = endpoints.filter((e) => e.ready);
  if (ready.length === 0 || !ready.every((e) => e.forZones?.length)) return endpoints;
  const mine = ready.filter((e) => e.forZones?.includes(zone));
  return mine.length > 0 ? mine : endpoints;
}
