/**
 * What discovery hands downstream (routing, balancing, proxy). Plain data: consumers never see
 * Kubernetes objects. Every answer says whether it is stale, so the proxy can tag spans and the
 * admin API can show it (last-known-good rule 3, docs/discovery.md).
 */
export interface ServiceKey {
  namespace: string;
  name: string;
}

export const keyString = (k: ServiceKey): string => `${k.namespace}/${k.name}`;

export type Protocol = 'TCP' | 'UDP' | 'SCTP';

export interface ServicePort {
  /** '' when the Service has a single unnamed port. */
  name: string;
  port: number;
  protocol: Protocol;
  appProtocol?: string;
  /** targetPort as written, for headless/no-slice fallbacks; endpoints carry the real numbers. */
  targetPort?: number | string;
}

export interface Endpoint {
  address: string;
  /** The endpoint's port for the Service port this endpoint list belongs to. */
  port: number;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  hostname?: string;
  nodeName?: string;
  zone?: string;
  /** Zones the EndpointSlice controller hints this endpoint for (hints.forZones): topology-aware routing. */
  forZones?: string[];
  /** Pod name from targetRef, when the slice has it. */
  podName?: string;
}

export interface ServiceInfo {
  key: ServiceKey;
  type: 'ClusterIP' | 'NodePort' | 'LoadBalancer' | 'ExternalName';
  /** clusterIP None. */
  headless: boolean;
  clusterIPs: string[];
  externalName?: string;
  ports: ServicePort[];
  sessionAffinity: 'None' | 'ClientIP';
  affinityTimeoutSeconds: number;
  internalTrafficPolicy: 'Cluster' | 'Local';
  /**
   * Usable endpoints per Service port name, already merged across slices and filtered the way
   * kube-proxy does (ready ones; else serving+terminating ones as the fallback).
   */
  endpoints: Map<string, Endpoint[]>;
}

export type Freshness =
  | { state: 'fresh'; syncedAt: number }
  /** Served from last-known-good data; since = when it went stale (or was loaded from a snapshot). */
  | { state: 'stale'; since: number; syncedAt?: number; reason: string };

export type Resolution =
  | {
      kind: 'found';
      service: ServiceInfo;
      freshness: Freshness;
      source: 'api' | 'snapshot' | 'file' | 'cold';
    }
  /** The API (or file) said authoritatively that it does not exist. */
  | { kind: 'absent' }
  /** We have never had data for it (no sync yet, no snapshot). */
  | { kind: 'unknown'; reason: string };

export interface DiscoveryStatus {
  ready: boolean;
  subscriptions: number;
  watches: number;
  staleServices: number;
  services: { key: string; freshness: Freshness; endpoints: number; source: string }[];
  /** Numbers for /metrics (names agreed in docs/discovery.md); only the API source has them. */
  counters?: DiscoveryCounters;
}

export interface DiscoveryCounters {
  /** Requests sent to the API server since start. */
  apiLists: number;
  apiWatches: number;
  apiFailures: number;
  /** Requests retried once after a 401 with a re-read token. */
  unauthorizedRetries: number;
  /** Services kept in the byte-capped cold tier (evicted from live watches, or from the snapshot). */
  coldServices: number;
  coldBytes: number;
  /** Services in the ClusterIP index. */
  indexedServices: number;
  snapshotWrites: number;
  /** JWT exp of the service-account token (ms since the epoch), when known. */
  tokenExpiresAtMs?: number;
}

/**
 * The port discovery offers downstream. resolve() subscribes on demand (first lookup opens the
 * watch) and waits at most waitMs for the first answer; peek() never subscribes and never waits.
 */
export interface Resolver {
  resolve(key: ServiceKey, opts?: { waitMs?: number }): Promise<Resolution>;
  /**
   * resolve() without the wait, for the request path: the same answer and side effects when the
   * Service is already known, undefined when resolve() would have to wait for discovery.
   */
  resolveNow(key: ServiceKey): Resolution | undefined;
  peek(key: ServiceKey): Resolution;
  /** ClusterIP -> Service, for transparent capture (needs the full Service index). */
  byClusterIP(ip: string): ServiceKey | undefined;
  /** Ready to route: first successful sync, or a snapshot loaded. Stays true through outages. */
  ready(): boolean;
  status(): DiscoveryStatus;
  close(): Promise<void>;
}
