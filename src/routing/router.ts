import { isIP } from 'node:net';
import type { Endpoint, Resolver, ServiceInfo, ServicePort } from '../discovery/types.ts';
import { keyString } from '../discovery/types.ts';
import { parseServiceName } from './authority.ts';

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

  constructor(o: RouterOptions) {
    this.#o = o;
  }

  async route(dest: Destination): Promise<Route> {
    const port = dest.port ?? dest.defaultPort;
    const pass = (reason: Extract<Route, { kind: 'passthrough' }>['reason'], serviceKey?: string): Route => ({
      kind: 'passthrough',
      host: dest.host,
      port,
      reason,
      ...(serviceKey ? { serviceKey } : {}),
    });
    let name: ReturnType<typeof parseServiceName>;
    if (isIP(dest.host) !== 0) {
      const key = this.#o.resolver.byClusterIP(dest.host);
      if (!key) return pass('not_a_service');
      name = { key };
    } else {
      name = parseServiceName(dest.host, this.#o.namespace, this.#o.clusterDomain);
      if (!name) return pass('not_a_service');
    }
    const res = await this.#o.resolver.resolve(name.key, { waitMs: this.#o.waitMs });
    if (res.kind === 'absent') return pass('not_a_service');
    if (res.kind === 'unknown') return pass('no_discovery_data');
    const service = res.service;
    const serviceKey = keyString(service.key);
    if (service.type === 'ExternalName' && service.externalName)
      return { kind: 'passthrough', host: service.externalName, port, reason: 'external_name', serviceKey };
    const sp = service.ports.find((p) => p.port === port && p.protocol === 'TCP');
    if (!sp) return pass('unknown_port', serviceKey);
    let endpoints = service.endpoints.get(sp.name) ?? [];
    const hostname = name.hostname;
    if (hostname !== undefined) endpoints = endpoints.filter((e) => e.hostname?.toLowerCase() === hostname);
    const node = service.internalTrafficPolicy === 'Local' ? this.#o.nodeName : undefined;
    // No failover to other nodes: the Service asked for node-local traffic or none (KEP-2086).
    if (node !== undefined) endpoints = endpoints.filter((e) => e.nodeName === node);
    else endpoints = inZone(endpoints, this.#o.zone);
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
