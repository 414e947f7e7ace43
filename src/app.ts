/**
 * The composition root (DESIGN.md section 2): the only module that wires discovery, routing,
 * balancing, the proxy listeners, tracing, metrics and the admin API together.
 * createDataPath() builds the sidecar from a Resolver (tests and the demo use it directly);
 * runProxy() adds the process concerns of `outrigger proxy`: discovery, tracing, signals and the
 * live re-application of annotations.
 */
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { AdminServer } from './admin/server.ts';
import { Metrics } from './admin/metrics.ts';
import { Balancers, type Algorithm } from './balance/balancer.ts';
import { loadConfig, type ConfigInputs } from './config/load.ts';
import type { Config } from './config/options.ts';
import { parsePodInfoFile } from './config/podinfo.ts';
import type { DiscoveryStatus, Resolver } from './discovery/types.ts';
import { AgentPool } from './proxy/agents.ts';
import type { OriginalDestination } from './proxy/capture-port.ts';
import { EgressHandler } from './proxy/egress.ts';
import { Forwarder } from './proxy/forward.ts';
import { IngressHandler } from './proxy/ingress.ts';
import { metricsObserver } from './proxy/metrics-observer.ts';
import { podAddressCheck } from './proxy/pod-addresses.ts';
import { combineObservers, type HopObserver } from './proxy/observer.ts';
import { defaultLimits, type ServerLimits } from './proxy/server.ts';
import { Sidecar } from './proxy/sidecar.ts';
import { AffinityTable } from './routing/affinity.ts';
import { Router } from './routing/router.ts';
import { systemClock, systemRandom, type Clock, type Random } from './shared/clock.ts';
import { errorMessage } from './shared/errors.ts';
import { createLogger, type Logger, type LogLevel } from './shared/log.ts';

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
  /** Listener addresses; the defaults are DESIGN.md's (egress on loopback only). */
  hosts?: { egress?: string; ingress?: string; admin?: string; app?: string };
  /** How long a first lookup waits for discovery before passing through. */
  discoveryWaitMs?: number;
  /** Redacted configuration for /debug/config. */
  configView?: () => unknown;
  metricsExtra?: () => Record<string, { help: string; value: number }>;
  /** Grace period of a drain started by POST /drain (SIGTERM passes its own). */
  drainGraceMs?: number;
  /** Transparent capture: how long a silent client is waited for before it is treated as TCP. */
  detectTimeoutMs?: number;
}

export interface DataPath {
  start(): Promise<void>;
  ports(): { egress: number; ingress: number; admin: number };
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
  const balancers = new Balancers({
    algorithm: config.balancer as Algorithm,
    clock,
    random,
    onEject: (service, endpoint) => {
      metrics.ejection(service);
      log.warn('endpoint ejected', { service, endpoint });
    },
  });
  const agents = new AgentPool();
  const forwarder = new Forwarder({
    agents,
    clock,
    connectTimeoutMs: config.connectTimeoutMs,
    responseTimeoutMs: config.requestTimeoutMs,
    idleTimeoutMs: config.idleTimeoutMs,
  });
  const ownPorts = new Set([config.egressPort, config.ingressPort, config.adminPort]);
  // Egress may reach the ingress listener (it delivers to the app, never back): a pod calling itself.
  const egressLoopPorts = new Set([config.egressPort, config.adminPort]);
  const transparent = config.capture === 'transparent';
  const od = transparent ? deps.originalDestination : undefined;
  const egress = new EgressHandler({
    policy: {
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
    },
    forwarder,
    observer,
    log: log.child({ listener: 'egress' }),
    clock,
    random,
    ...(od ? { originalDestination: od } : {}),
    connectTimeoutMs: config.connectTimeoutMs,
    idleTimeoutMs: config.idleTimeoutMs,
  });
  const appHost = deps.hosts?.app ?? '127.0.0.1';
  const ingress = new IngressHandler({
    forwarder,
    observer,
    log: log.child({ listener: 'ingress' }),
    clock,
    appPorts: config.appPorts,
    appHost,
    ownPorts,
    ...(od ? { originalDestination: od } : {}),
    isPodAddress: deps.isPodAddress ?? podAddressCheck({ podIPs: deps.podIP ? [deps.podIP] : [], clock }),
    connectTimeoutMs: config.connectTimeoutMs,
    idleTimeoutMs: config.idleTimeoutMs,
  });
  const sidecar = new Sidecar({
    egress: {
      host: deps.hosts?.egress ?? '127.0.0.1',
      port: config.egressPort,
      handler: egress,
      // ip6tables REDIRECT sends the app's IPv6 connections to ::1, not 127.0.0.1.
      ...(transparent && !deps.hosts?.egress ? { extraHosts: ['::1'] } : {}),
    },
    ingress: { host: deps.hosts?.ingress ?? '::', port: config.ingressPort, handler: ingress },
    limits: {
      ...defaultLimits,
      keepAliveTimeoutMs: config.idleTimeoutMs,
      uploadIdleTimeoutMs: config.idleTimeoutMs,
      ...deps.limits,
    },
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
      const ready = deps.resolver.ready() && !draining;
      const s = deps.resolver.status();
      return {
        ready,
        detail: {
          discovery: {
            ready: s.ready,
            subscriptions: s.subscriptions,
            watches: s.watches,
            staleServices: s.staleServices,
          },
          draining,
        },
      };
    },
    metrics,
    debug: {
      discovery: () => deps.resolver.status(),
      config: () => deps.configView?.() ?? config,
      balancer: () => balancers.view(),
      connections: () => ({ ...sidecar.connections(), upstream: agents.stats() }),
    },
    drain: () => void dataPath.drain(deps.drainGraceMs ?? 25_000).catch(() => {}),
  });
  let drainPromise: Promise<void> | undefined;
  const dataPath: DataPath = {
    metrics,
    sidecar,
    async start() {
      await sidecar.start();
      await admin.start();
      // With port 0 (tests) the bound ports are known only now; the loop guard must see them.
      const { egress: e, ingress: i, admin: a } = dataPath.ports();
      for (const p of [e, i, a]) ownPorts.add(p);
      for (const p of [e, a]) egressLoopPorts.add(p);
    },
    ports: () => ({ ...sidecar.ports(), admin: admin.port() }),
    drain(graceMs) {
      draining = true;
      drainPromise ??= sidecar.drain(graceMs, () =>
        appGone([appHost, ...(deps.podIP ? [deps.podIP] : [])], config.appPorts),
      );
      return drainPromise;
    },
    async close() {
      sidecar.close();
      agents.destroy();
      await admin.close();
    },
  };
  return dataPath;
}

function discoveryGauges(s: DiscoveryStatus, now: number) {
  let oldest = now;
  for (const svc of s.services)
    if (svc.freshness.state === 'stale') oldest = Math.min(oldest, svc.freshness.since);
  return {
    ready: s.ready,
    subscriptions: s.subscriptions,
    watches: s.watches,
    staleServices: s.staleServices,
    oldestStaleSeconds: (now - oldest) / 1000,
  };
}

/** The app has gone when none of its ports accepts a connection any more. */
async function appGone(hosts: readonly string[], ports: readonly number[]): Promise<boolean> {
  const open = await Promise.all(hosts.flatMap((host) => ports.map((port) => accepts(host, port))));
  return !open.some(Boolean);
}

function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.setTimeout(500, () => {
      s.destroy();
      resolve(true);
    });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** `outrigger proxy`: everything createDataPath needs, from the validated configuration. */
export async function runProxy(
  inputs: ConfigInputs,
  env: Record<string, string | undefined> = process.env,
): Promise<void> {
  const annotationsFile = (dir: string): string => join(dir, 'annotations');
  const readPodFile = (path: string): Record<string, string> => {
    try {
      return parsePodInfoFile(readFileSync(path, 'utf8'));
    } catch {
      return {};
    }
  };
  const podInfoDir = loadConfig({ ...inputs, annotations: {} }).podInfoDir;
  const config = loadConfig({ ...inputs, annotations: readPodFile(annotationsFile(podInfoDir)) });
  const clock = systemClock;
  const log = createLogger({ level: config.logLevel as LogLevel, base: { component: 'outrigger' } });
  // Loaded here, not at the top: createDataPath's users (the demo, tests) need neither the
  // discovery factory nor the OpenTelemetry SDK and exporter (~17 MB RSS).
  const [{ createDiscovery }, { createTracing, podMetaFromEnv }] = await Promise.all([
    import('./discovery/index.ts'),
    import('./tracing/index.ts'),
  ]);
  const discovery = await createDiscovery(config, { clock, random: systemRandom, logger: log, env });
  const pod = podMetaFromEnv(env);
  const labels = readPodFile(join(podInfoDir, 'labels'));
  const zone = config.zone ?? labels['topology.kubernetes.io/zone'];
  const tracing = createTracing({
    endpoint: config.traceEndpoint,
    sampling: config.traceSampling,
    pod: {
      ...pod,
      labels,
      ...(config.serviceName ? { serviceName: config.serviceName } : {}),
    },
    logger: log,
  });
  let originalDestination: OriginalDestination | undefined;
  if (config.capture === 'transparent') {
    const capture = await import('./proxy/capture/original-destination.ts');
    const listeners = [
      { address: '127.0.0.1', port: config.egressPort },
      { address: '::1', port: config.egressPort },
      { port: config.ingressPort },
      { port: config.adminPort },
    ];
    // A connection that was not redirected reports our own listener: that is no destination.
    originalDestination = (socket) => {
      const d = capture.originalDestination(socket);
      return d && !capture.isOwnListener(d, listeners) ? d : undefined;
    };
  }
  const dataPath = createDataPath(config, {
    resolver: discovery,
    namespace: discovery.namespace,
    ...(pod.nodeName ? { nodeName: pod.nodeName } : {}),
    ...(zone ? { zone } : {}),
    ...(env.OUTRIGGER_POD_IP ? { podIP: env.OUTRIGGER_POD_IP } : {}),
    log,
    clock,
    // A disabled tracer is a no-op observer: leave it out of the per-request fan-out.
    ...(tracing.enabled ? { observer: tracing.observer } : {}),
    ...(originalDestination ? { originalDestination } : {}),
    configView: () => config,
    drainGraceMs: config.drainSeconds * 1000,
    metricsExtra: () => {
      const t = tracing.stats();
      return {
        outrigger_trace_spans_dropped: {
          help: 'Spans dropped (queue full or export failed)',
          value: t.dropped,
        },
      };
    },
  });
  try {
    await dataPath.start();
  } catch (e) {
    // A port in use must not leave discovery's watches and timers holding the process open.
    await Promise.allSettled([dataPath.close(), tracing.shutdown(), discovery.close()]);
    throw e;
  }
  log.info('outrigger proxy started', {
    ...dataPath.ports(),
    capture: config.capture,
    source: config.source.kind,
  });

  const watcher = watchAnnotations(podInfoDir, log, () =>
    applyLiveOptions(inputs, readPodFile(annotationsFile(podInfoDir)), { log, tracing }),
  );

  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) {
        // A second signal (an impatient Ctrl-C) ends the drain.
        log.warn('second signal: exiting without finishing the drain', { signal });
        process.exit(1);
      }
      stopping = true;
      log.info('shutting down', { signal, drainSeconds: config.drainSeconds });
      watcher?.close();
      void dataPath
        .drain(config.drainSeconds * 1000)
        .then(() => Promise.allSettled([tracing.shutdown(), discovery.close(), dataPath.close()]))
        .finally(resolve);
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
}

/**
 * Re-applies the live options (DESIGN.md 1: log level, trace sampling) after the annotations file
 * changed. The whole configuration is validated again; an invalid change keeps the running values.
 */
export function applyLiveOptions(
  inputs: ConfigInputs,
  annotations: Record<string, string>,
  targets: { log: Logger; tracing: { setSampling(ratio: number): void } },
): boolean {
  try {
    const next = loadConfig({ ...inputs, annotations });
    targets.log.setLevel(next.logLevel as LogLevel);
    targets.tracing.setSampling(next.traceSampling);
    targets.log.info('live options re-applied', {
      logLevel: next.logLevel,
      traceSampling: next.traceSampling,
    });
    return true;
  } catch (e) {
    targets.log.warn('annotations changed but are invalid; keeping the running values', {
      error: errorMessage(e),
    });
    return false;
  }
}

/** Kubelet rewrites the downward-API files by swapping a ..data symlink: watch the directory. */
function watchAnnotations(dir: string, log: Logger, onChange: () => void): FSWatcher | undefined {
  try {
    let timer: NodeJS.Timeout | undefined;
    const w = watch(dir, () => {
      clearTimeout(timer);
      timer = setTimeout(onChange, 100);
    });
    w.on('error', () => w.close());
    return w;
  } catch {
    log.debug('no pod info directory to watch', { dir });
    return undefined;
  }
}
