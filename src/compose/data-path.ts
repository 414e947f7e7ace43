/**
 * The data path every proxying command shares: balancing, the forwarder, metrics and tracing
 * observers, the egress and ingress listeners and the admin API, over any Resolver. `outrigger
 * proxy` builds it from discovery (sidecar.ts); the demo, tests and benchmarks build it directly
 * from a file or fake resolver.
 */
import { AdminServer } from '../admin/server.ts';
import type { AppHealth } from '../admin/app-health.ts';
import { Metrics } from '../admin/metrics.ts';
import type { Config } from '../config/options.ts';
import type { Resolver } from '../discovery/types.ts';
import type { OriginalDestination } from '../proxy/capture-port.ts';
import { EgressHandler } from '../proxy/egress.ts';
import type { EgressPolicy } from '../proxy/egress-plan.ts';
import { createH2DataPath } from '../proxy/h2/index.ts';
import { markTunnel, speaksH2c } from '../proxy/h2/routes.ts';
import { Forwarder } from '../proxy/forward.ts';
import { IngressHandler } from '../proxy/ingress.ts';
import { metricsObserver } from '../proxy/metrics-observer.ts';
import { podAddressCheck } from '../proxy/pod-addresses.ts';
import { combineObservers, type HopObserver } from '../proxy/observer.ts';
import { defaultLimits, type ServerLimits } from '../proxy/server.ts';
import { Sidecar } from '../proxy/sidecar.ts';
import { UpstreamClient } from '../proxy/upstream-client.ts';
import { AffinityTable } from '../routing/affinity.ts';
import { Router } from '../routing/router.ts';
import { systemClock, systemRandom, type Clock, type Random } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import type { MeshWiring } from '../mesh/wiring.ts';
import { appGone } from './app-gone.ts';
import { discoveryGauges, discoveryReadiness } from './discovery.ts';
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
  /** More /debug sections (mesh identity). */
  debugExtra?: Record<string, () => unknown>;
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

/** Attempts per request: the first plus two retries, as Istio's default retry policy. */
const MAX_ATTEMPTS = 3;

export function createDataPath(config: DataPathConfig, deps: DataPathDeps): DataPath {
  const clock = deps.clock ?? systemClock;
  const random = deps.random ?? systemRandom;
  const log = deps.log;
  const metrics = new Metrics();
  const observer = combineObservers(
    metricsObserver(metrics, clock),
    ...(deps.observer ? [deps.observer] : []),
  );
  // With the mesh, egress dials endpoints through mutual TLS; the app next door stays plaintext.
  const { balancers, upstream, forwarder } = createUpstream(config, {
    metrics,
    log,
    clock,
    random,
    ...(deps.mesh ? { dial: deps.mesh.dial } : {}),
  });
  const appUpstream = deps.mesh
    ? new UpstreamClient({
        clock,
        connectTimeoutMs: config.connectTimeoutMs,
        responseTimeoutMs: config.requestTimeoutMs,
        idleTimeoutMs: config.idleTimeoutMs,
      })
    : upstream;
  const appForwarder = deps.mesh
    ? new Forwarder({ client: appUpstream, idleTimeoutMs: config.idleTimeoutMs })
    : forwarder;
  const ownPorts = new Set([config.egressPort, config.ingressPort, config.adminPort]);
  // Egress may reach the ingress listener (it delivers to the app, never back): a pod calling itself.
  const egressLoopPorts = new Set([config.egressPort, config.adminPort]);
  const transparent = config.capture === 'transparent';
  const od = transparent ? deps.originalDestination : undefined;
  const policy: EgressPolicy = {
    router: new Router({
      resolver: deps.resolver,
      namespace: deps.namespace,
      clusterDomain: config.clusterDomain,
      waitMs: deps.discoveryWaitMs ?? 1_000,
      ...(deps.nodeName ? { nodeName: deps.nodeName } : {}),
      ...(deps.zone ? { zone: deps.zone } : {}),
    }),
    balancers,
    affinity: new AffinityTable(clock),
    egressPolicy: config.egressPolicy as 'allow-all' | 'cluster-only',
    ownPorts: egressLoopPorts,
    retryStatuses: new Set(config.retryStatuses),
    maxAttempts: MAX_ATTEMPTS,
    onConnectError: (service) => metrics.connectError(service),
  };
  const egress = new EgressHandler({
    policy,
    forwarder,
    observer,
    log: log.child({ listener: 'egress' }),
    clock,
    random,
    ...(od ? { originalDestination: od } : {}),
    connectTimeoutMs: config.connectTimeoutMs,
    idleTimeoutMs: config.idleTimeoutMs,
    ...(deps.detectTimeoutMs !== undefined ? { detectTimeoutMs: deps.detectTimeoutMs } : {}),
    ...(deps.mesh ? { tcpDial: deps.mesh.dialTcp } : {}),
    h2Tunnel: {
      accepts: speaksH2c,
      adopt: (socket, head, dest): Promise<void> => {
        markTunnel(socket, dest);
        return sidecar.adoptEgressH2(socket, head);
      },
    },
  });
  const appHost = deps.hosts?.app ?? '127.0.0.1';
  const ingressOptions = {
    forwarder: appForwarder,
    observer,
    log: log.child({ listener: 'ingress' }),
    clock,
    appPorts: config.appPorts,
    appHost,
    ownPorts,
    isPodAddress: deps.isPodAddress ?? podAddressCheck({ podIPs: deps.podIP ? [deps.podIP] : [], clock }),
    connectTimeoutMs: config.connectTimeoutMs,
    idleTimeoutMs: config.idleTimeoutMs,
  };
  const ingress = new IngressHandler({
    ...ingressOptions,
    ...(od ? { originalDestination: od } : {}),
    ...(deps.mesh ? { refuse: deps.mesh.refusePlaintext } : {}),
  });
  const limits = {
    ...defaultLimits,
    keepAliveTimeoutMs: config.idleTimeoutMs,
    uploadIdleTimeoutMs: config.idleTimeoutMs,
    ...deps.limits,
  };
  // Meshed callers: the app port from the handshake, their identity to the app.
  const meshIngress =
    deps.mesh &&
    new IngressHandler({
      ...ingressOptions,
      log: log.child({ listener: 'mesh' }),
      // The caller names only the port; the address is ours (the pod's IP under transparent
      // capture). Explicit mode has no original destinations to honour: the app ports only.
      originalDestination: (socket) => {
        const d = deps.mesh?.destination(socket);
        return d && (transparent || config.appPorts.includes(d.port)) ? d : undefined;
      },
      isPodAddress: () => true,
      callerIdentity: deps.mesh.callerIdentity,
      peer: deps.mesh.peer,
    });
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
  const admin = new AdminServer({
    host: deps.hosts?.admin ?? '::',
    port: config.adminPort,
    readiness: () => {
      const certified = deps.mesh?.ready() ?? true;
      const ready = deps.resolver.ready() && !draining && certified;
      return {
        ready,
        detail: {
          discovery: discoveryReadiness(deps.resolver.status()),
          draining,
          ...(deps.mesh ? { meshCertificate: certified } : {}),
        },
      };
    },
    metrics,
    debug: {
      discovery: () => deps.resolver.status(),
      config: () => deps.configView?.() ?? config,
      balancer: () => balancers.view(),
      connections: () => ({
        ...sidecar.connections(),
        upstream: upstream.stats(),
        upstreamH2: h2.stats(),
      }),
      ...(deps.mesh ? { mesh: () => deps.mesh?.stats() } : {}),
      ...deps.debugExtra,
    },
    drain: () => void dataPath.drain(deps.drainGraceMs ?? 25_000).catch(() => {}),
    ...(deps.appHealth ? { appHealth: deps.appHealth } : {}),
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
