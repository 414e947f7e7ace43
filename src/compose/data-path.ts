/**
 * The data path every proxying command shares: balancing, the forwarder, metrics and tracing
 * observers, the egress and ingress listeners and the admin API, over any Resolver. `outrigger
 * proxy` builds it from discovery (sidecar.ts); the demo, tests and benchmarks build it directly
 * from a file or fake resolver.
 */
import type { AppHealth } from '../admin/app-health.ts';
import { Metrics } from '../admin/metrics.ts';
import type { Config } from '../config/options.ts';
import type { MeshRouteTable } from '../routes/mesh.ts';
import type { Resolver } from '../discovery/types.ts';
import type { OriginalDestination } from '../proxy/capture-port.ts';
import { createH2DataPath } from '../proxy/h2/index.ts';
import { metricsObserver } from '../proxy/metrics-observer.ts';
import { combineObservers, type HopObserver } from '../proxy/observer.ts';
import { defaultLimits, type ServerLimits } from '../proxy/server.ts';
import { Sidecar } from '../proxy/sidecar.ts';
import { systemClock, systemRandom, type Clock, type Random } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import type { MeshWiring } from '../mesh/wiring.ts';
import { appGone } from './app-gone.ts';
import { createAdmin } from './data-path-admin.ts';
import { createEgress } from './data-path-egress.ts';
import { createIngress } from './data-path-ingress.ts';
import { discoveryGauges } from './discovery.ts';
import { createUpstream } from './upstream.ts';

export type DataPathConfig = Pick<
  Config,
  | 'capture'
  | 'egressPort'
  | 'ingressPort'
  | 'adminPort'
  | 'appPorts'
  | 'clusterDomain'
  | 'egressPolicy'
  | 'balancer'
  | 'connectTimeoutMs'
  | 'requestTimeoutMs'
  | 'idleTimeoutMs'
  | 'retryStatuses'
>;

export interface DataPathDeps {
  resolver: Resolver;
  /** Namespace for short Service names. */
  namespace: string;
  log: Logger;
  clock?: Clock;
  random?: Random;
  /** Tracing's observer; metrics are always observed. */
  observer?: HopObserver;
  /** This pod's node (downward API), for internalTrafficPolicy: Local. */
  nodeName?: string;
  /** This pod's zone, for topology-aware routing. */
  zone?: string;
  /** This pod's IP (downward API): an app bound to it alone is still "running" during a drain. */
  podIP?: string;
  /** Which addresses are this pod's (transparent ingress); default: podIP and the interfaces. */
  isPodAddress?: (address: string) => boolean;
  originalDestination?: OriginalDestination;
  limits?: Partial<ServerLimits>;
  /** Listener addresses; by default egress listens on loopback only. */
  hosts?: { egress?: string; ingress?: string; admin?: string; app?: string };
  /** How long a first lookup waits for discovery before passing through. */
  discoveryWaitMs?: number;
  /** Redacted configuration for /debug/config. */
  configView?: () => unknown;
  metricsExtra?: () => Record<string, { help: string; value: number }>;
  /** Grace period of a drain started by POST /drain (SIGTERM passes its own). */
  drainGraceMs?: number;
  /**
   * How long a silent client is waited for before it is treated as TCP (transparent capture, and
   * CONNECT tunnels to h2c ports).
   */
  detectTimeoutMs?: number;
  /** Mutual TLS between sidecars: the egress dialer and the mesh listener. */
  mesh?: MeshWiring;
  /** Kubelet's rewritten app probes, replayed on the admin port (mtls strict). */
  appHealth?: AppHealth;
  /** More /debug sections (mesh identity, routes). */
  debugExtra?: Record<string, () => unknown>;
  /** HTTPRoutes attached to Services (--mesh-routes), applied to the app's HTTP/1.1 calls. */
  routes?: { table(): MeshRouteTable };
}

export interface DataPath {
  start(): Promise<void>;
  ports(): { egress: number; ingress: number; admin: number; mesh?: number };
  /** SIGTERM: ingress stops, egress serves until the app has gone or graceMs ends. */
  drain(graceMs: number): Promise<void>;
  close(): Promise<void>;
  readonly metrics: Metrics;
  readonly sidecar: Sidecar;
}

export function createDataPath(config: DataPathConfig, deps: DataPathDeps): DataPath {
  const clock = deps.clock ?? systemClock;
  const random = deps.random ?? systemRandom;
  const log = deps.log;
  const metrics = new Metrics();
  const observer = combineObservers(
    metricsObserver(metrics, clock),
    ...(deps.observer ? [deps.observer] : []),
  );
  // With the mesh, egress dials endpoints through mutual TLS.
  const { balancers, upstream, forwarder } = createUpstream(config, {
    metrics,
    log,
    clock,
    random,
    ...(deps.mesh ? { dial: deps.mesh.dial } : {}),
  });
  const ownPorts = new Set([config.egressPort, config.ingressPort, config.adminPort]);
  // Egress may reach the ingress listener (it delivers to the app, never back): a pod calling itself.
  const egressLoopPorts = new Set([config.egressPort, config.adminPort]);
  const transparent = config.capture === 'transparent';
  const od = transparent ? deps.originalDestination : undefined;
  const { policy, egress } = createEgress(config, deps, {
    balancers,
    forwarder,
    metrics,
    observer,
    clock,
    random,
    loopPorts: egressLoopPorts,
    originalDestination: od,
    adoptH2: (socket, head) => sidecar.adoptEgressH2(socket, head),
  });
  const { ingress, meshIngress, appUpstream, appHost } = createIngress(config, deps, {
    upstream,
    forwarder,
    observer,
    clock,
    ownPorts,
    originalDestination: od,
  });
  const limits = {
    ...defaultLimits,
    keepAliveTimeoutMs: config.idleTimeoutMs,
    uploadIdleTimeoutMs: config.idleTimeoutMs,
    ...deps.limits,
  };
  const h2 = createH2DataPath({
    policy,
    ingress,
    observer,
    log,
    clock,
    random,
    ...(od ? { originalDestination: od } : {}),
    connectTimeoutMs: config.connectTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    idleTimeoutMs: config.idleTimeoutMs,
    ...(deps.mesh && meshIngress
      ? {
          refuse: deps.mesh.refusePlaintext,
          mesh: {
            dial: deps.mesh.dialH2,
            ingress: meshIngress,
            callerIdentity: deps.mesh.callerIdentity,
            peer: deps.mesh.peer,
          },
        }
      : {}),
  });
  const meshListener =
    meshIngress &&
    deps.mesh?.listener(
      { onRequest: meshIngress.onRequest, onStream: h2.mesh, onTcp: (s, r) => meshIngress.onTcp(s, r) },
      ownPorts,
      limits,
    );
  const sidecar = new Sidecar({
    egress: {
      host: deps.hosts?.egress ?? '127.0.0.1',
      port: config.egressPort,
      handler: egress,
      h2: h2.egress,
      // ip6tables REDIRECT sends the app's IPv6 connections to ::1, not 127.0.0.1.
      ...(transparent && !deps.hosts?.egress ? { extraHosts: ['::1'] } : {}),
    },
    ingress: {
      host: deps.hosts?.ingress ?? '::',
      port: config.ingressPort,
      handler: ingress,
      h2: h2.ingress,
    },
    limits,
    sniff: transparent,
    detectTimeoutMs: deps.detectTimeoutMs ?? 1_000,
    ...(od ? { originalDestination: od } : {}),
    log,
    clock,
    onRejected: (listener, code, status) => metrics.rejected(listener, status, code),
  });
  metrics.setSources({
    discovery: () => discoveryGauges(deps.resolver.status(), clock.now()),
    ...(deps.metricsExtra ? { extra: deps.metricsExtra } : {}),
  });
  let draining = false;
  const admin = createAdmin(config, deps, {
    metrics,
    balancers,
    sidecar,
    connections: () => ({ upstream: upstream.stats(), upstreamH2: h2.stats() }),
    draining: () => draining,
    drain: () => void dataPath.drain(deps.drainGraceMs ?? 25_000).catch(() => {}),
  });
  let drainPromise: Promise<void> | undefined;
  const dataPath: DataPath = {
    metrics,
    sidecar,
    async start() {
      await sidecar.start();
      await meshListener?.start();
      await admin.start();
      // With port 0 (tests) the bound ports are known only now; the loop guard must see them.
      const { egress: e, ingress: i, admin: a } = dataPath.ports();
      for (const p of [e, i, a]) ownPorts.add(p);
      for (const p of [e, a]) egressLoopPorts.add(p);
    },
    ports: () => ({
      ...sidecar.ports(),
      admin: admin.port(),
      ...(meshListener ? { mesh: meshListener.port() } : {}),
    }),
    drain(graceMs) {
      draining = true;
      meshListener?.stopAccepting();
      drainPromise ??= sidecar.drain(graceMs, () =>
        appGone([appHost, ...(deps.podIP ? [deps.podIP] : [])], config.appPorts),
      );
      return drainPromise;
    },
    async close() {
      sidecar.close();
      upstream.close();
      if (appUpstream !== upstream) appUpstream.close();
      await meshListener?.close();
      h2.close();
      await admin.close();
    },
  };
  return dataPath;
}
