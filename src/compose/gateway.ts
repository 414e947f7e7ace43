/**
 * `outrigger gateway`: an Ingress controller built from the sidecar's parts. Discovery reads
 * Ingresses, IngressClasses and TLS Secrets (src/gateway/store.ts) and Services and EndpointSlices
 * (the sidecar's resolver) over ONE API connection; requests go through the sidecar's forwarder,
 * balancer, retry budget and outlier ejection; metrics and a SERVER span per request.
 * startGateway() wires it from a validated configuration (tests use it directly); runGateway() adds
 * the process concerns: tracing, signals and the drain.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { AdminServer } from '../admin/server.ts';
import { Metrics } from '../admin/metrics.ts';
import { Balancers, type Algorithm } from '../balance/balancer.ts';
import type { KubeApi } from '../discovery/kube/api.ts';
import { createKubeResolver, type KubeResolver, type KubeResolverOptions } from '../discovery/resolver.ts';
import { Certificates } from '../gateway/certs.ts';
import { IngressGatewayHandler } from '../gateway/handler.ts';
import { GatewayListeners } from '../gateway/listeners.ts';
import { loadGatewayConfig, type GatewayConfig, type GatewayOptionName } from '../config/gateway-options.ts';
import { createGatewayStore, type GatewayStore, type GatewayStoreOptions } from '../gateway/store.ts';
import { AgentPool } from '../proxy/agents.ts';
import { Forwarder } from '../proxy/forward.ts';
import { metricsObserver } from '../proxy/metrics-observer.ts';
import { combineObservers, type HopObserver } from '../proxy/observer.ts';
import { defaultLimits, type ServerLimits } from '../proxy/server.ts';
import type { Ingress } from '../gateway/objects.ts';
import { StatusPublisher } from '../gateway/status.ts';
import { systemClock, systemRandom, type Clock, type Random } from '../shared/clock.ts';
import { OutriggerError } from '../shared/errors.ts';
import { createLogger, type Logger, type LogLevel } from '../shared/log.ts';

/** Attempts per request: the first plus two retries, as the sidecar (Istio's default policy). */
const MAX_ATTEMPTS = 3;

/**
 * A gateway runs as a couple of replicas, not one per pod: its watches can retry far sooner than a
 * fleet of sidecars may (client-go's 800 ms to 30 s), so a change made when the API server comes
 * back is applied within about a second, and a stalled list is given up after 10 s.
 */
const GATEWAY_REFLECTOR = { backoff: { initialMs: 200, maxMs: 2_000, factor: 2 }, listTimeoutMs: 10_000 };

export interface GatewayDeps {
  api: KubeApi;
  clock?: Clock;
  random?: Random;
  log: Logger;
  /** Tracing's observer; metrics are always observed. */
  observer?: HopObserver;
  limits?: Partial<ServerLimits>;
  /** Tuning for tests (backoff, timeouts, debounce); production uses the defaults. */
  tuning?: {
    reflector?: GatewayStoreOptions['reflector'];
    snapshotDebounceMs?: number;
    discoveryWaitMs?: number;
  } & Pick<KubeResolverOptions, 'transportStats' | 'tokenExpiresAt'>;
  metricsExtra?: () => Record<string, { help: string; value: number }>;
}

export interface Gateway {
  ports(): { http: number; https: number | undefined; admin: number };
  readonly store: GatewayStore;
  readonly resolver: KubeResolver;
  readonly metrics: Metrics;
  /** SIGTERM: readiness turns false, listeners stop accepting, in-flight requests finish. */
  drain(graceMs: number): Promise<void>;
  close(): Promise<void>;
}

export async function startGateway(config: GatewayConfig, deps: GatewayDeps): Promise<Gateway> {
  const clock = deps.clock ?? systemClock;
  const random = deps.random ?? systemRandom;
  const log = deps.log;
  const metrics = new Metrics();
  const certs = new Certificates(log.child({ component: 'gateway-tls' }));
  const snapshot = (file: string): string | undefined =>
    config.snapshotDir ? join(config.snapshotDir, file) : undefined;
  // Private to the gateway's user: it holds TLS private keys.
  if (config.snapshotDir) await mkdir(config.snapshotDir, { recursive: true, mode: 0o700 });
  const resolverSnapshot = snapshot('services.snap');
  const resolver = await createKubeResolver({
    api: deps.api,
    clock,
    random,
    logger: log,
    maxWatches: config.maxWatches,
    serviceScope: config.watchNamespace ? 'namespace' : 'cluster',
    ...(config.watchNamespace ? { homeNamespace: config.watchNamespace } : {}),
    ...(resolverSnapshot ? { snapshotPath: resolverSnapshot } : {}),
    reflector: deps.tuning?.reflector ?? GATEWAY_REFLECTOR,
    ...(deps.tuning?.snapshotDebounceMs !== undefined
      ? { snapshotDebounceMs: deps.tuning.snapshotDebounceMs }
      : {}),
    ...(deps.tuning?.transportStats ? { transportStats: deps.tuning.transportStats } : {}),
    ...(deps.tuning?.tokenExpiresAt ? { tokenExpiresAt: deps.tuning.tokenExpiresAt } : {}),
  });
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
  // Gateway hops are counted under their own direction label; tracing sees them as SERVER spans.
  const gatewayMetrics = {
    request: (_d: string, service: string, status: number, error: string, s: number) =>
      metrics.request('gateway', service, status, error, s),
    retry: (_d: string, service: string, reason: string) => metrics.retry('gateway', service, reason),
  };
  const observer = combineObservers(
    metricsObserver(gatewayMetrics, clock),
    ...(deps.observer ? [deps.observer] : []),
  );
  const handler = new IngressGatewayHandler({
    table: () => store.table(),
    tableStale: () => store.stale(),
    backends: {
      resolver,
      balancers,
      retryStatuses: new Set(config.retryStatuses),
      maxAttempts: MAX_ATTEMPTS,
      waitMs: deps.tuning?.discoveryWaitMs ?? 1_000,
      ...(config.zone ? { zone: config.zone } : {}),
      onConnectError: (service) => metrics.connectError(service),
    },
    forwarder,
    observer,
    log: log.child({ listener: 'gateway' }),
    clock,
  });
  // Requests reach the store only after start(): the handler reads it lazily.
  const listeners = new GatewayListeners({
    http: { host: config.listenHost, port: config.httpPort },
    https: { host: config.listenHost, port: config.httpsPort },
    limits: { ...defaultLimits, keepAliveTimeoutMs: config.idleTimeoutMs, ...deps.limits },
    handler,
    certs,
    log,
    clock,
    onRejected: (code, status) => metrics.rejected('gateway', status, code),
  });
  const status = statusPublisher(config, deps.api, clock, log, () => store.served());
  const storeSnapshot = snapshot('gateway.snap');
  const store = await createGatewayStore({
    api: deps.api,
    clock,
    random,
    logger: log,
    classPolicy: { controller: config.controller, watchWithoutClass: config.watchWithoutClass },
    ...(config.watchNamespace ? { namespace: config.watchNamespace } : {}),
    ...(config.defaultCertificate ? { defaultCertificate: config.defaultCertificate } : {}),
    ...(storeSnapshot ? { snapshotPath: storeSnapshot } : {}),
    reflector: deps.tuning?.reflector ?? GATEWAY_REFLECTOR,
    ...(deps.tuning?.snapshotDebounceMs !== undefined
      ? { snapshotDebounceMs: deps.tuning.snapshotDebounceMs }
      : {}),
    onTable: (table, secrets) => {
      status?.schedule();
      certs.update(table, secrets, config.defaultCertificate);
      listeners.refreshDefaultCertificate();
      // Every backend is watched from the start: the first request does not wait for discovery,
      // and the snapshot holds every Service a route needs.
      for (const key of table.services()) {
        const [namespace = '', name = ''] = key.split('/');
        void resolver.resolve({ namespace, name }, { waitMs: 0 });
      }
    },
  });

  metrics.setSources({
    discovery: () => {
      const s = resolver.status();
      return {
        ready: s.ready,
        subscriptions: s.subscriptions,
        watches: s.watches,
        staleServices: s.staleServices,
        oldestStaleSeconds: 0,
      };
    },
    extra: () => {
      const g = store.status();
      return {
        outrigger_gateway_ready: {
          help: 'Routes known (listed or from the snapshot)',
          value: g.ready ? 1 : 0,
        },
        outrigger_gateway_ingresses: { help: 'Ingresses served', value: g.servedIngresses },
        outrigger_gateway_routes: { help: 'Host and path rules in the route table', value: g.routes },
        outrigger_gateway_tls_secrets: { help: 'TLS Secrets served', value: g.tlsSecrets },
        outrigger_gateway_stale_collections: {
          help: 'Collections (Ingresses, IngressClasses, Secrets) served from last-known-good data',
          value: g.stale.length,
        },
        ...deps.metricsExtra?.(),
      };
    },
  });
  let draining = false;
  const admin = new AdminServer({
    host: config.listenHost,
    port: config.adminPort,
    readiness: () => {
      const g = store.status();
      return {
        ready: g.ready && !draining,
        detail: { gateway: { ready: g.ready, routes: g.routes, stale: g.stale.length }, draining },
      };
    },
    metrics,
    debug: {
      gateway: () => store.status(),
      discovery: () => resolver.status(),
      certificates: () => certs.served(),
      config: () => config,
      balancer: () => balancers.view(),
    },
  });
  const closeAll = async (): Promise<void> => {
    status?.close();
    listeners.close();
    agents.destroy();
    await Promise.allSettled([admin.close(), store.close(), resolver.close()]);
  };
  try {
    await listeners.start();
    await admin.start();
  } catch (e) {
    // A port in use must not leave the watches and timers holding the process open.
    await closeAll();
    throw e;
  }
  const l = listeners;
  return {
    ports: () => ({ ...l.ports(), admin: admin.port() }),
    store,
    resolver,
    metrics,
    async drain(graceMs) {
      draining = true;
      await l.drain(graceMs);
    },
    close: closeAll,
  };
}

/** --publish-status-address: the publisher, or undefined when the flag is empty. */
function statusPublisher(
  config: GatewayConfig,
  api: KubeApi,
  clock: Clock,
  log: Logger,
  served: () => Ingress[],
): StatusPublisher | undefined {
  if (config.publishStatusAddress.length === 0) return undefined;
  const mergePatch = api.mergePatch?.bind(api);
  if (!mergePatch)
    throw new OutriggerError(
      'config_invalid',
      '--publish-status-address needs an API connection that can write',
    );
  return new StatusPublisher({
    api: { mergePatch },
    addresses: config.publishStatusAddress,
    served,
    clock,
    logger: log.child({ component: 'gateway-status' }),
  });
}

/** `outrigger gateway`: the process around startGateway. */
export async function runGateway(
  flags: Partial<Record<GatewayOptionName, string | string[]>>,
  env: Record<string, string | undefined> = process.env,
): Promise<void> {
  const config = loadGatewayConfig({ flags, env });
  const clock = systemClock;
  const log = createLogger({ level: config.logLevel as LogLevel, base: { component: 'outrigger-gateway' } });
  const [{ connectKube }, { createTracing, podMetaFromEnv }] = await Promise.all([
    import('../discovery/index.ts'),
    import('../tracing/index.ts'),
  ]);
  const link = await connectKube(config, { clock, logger: log, env });
  const tracing = createTracing({
    endpoint: config.traceEndpoint,
    sampling: config.traceSampling,
    pod: { ...podMetaFromEnv(env), ...(config.serviceName ? { serviceName: config.serviceName } : {}) },
    logger: log,
  });
  let gateway: Gateway;
  try {
    gateway = await startGateway(config, {
      api: link.transport,
      clock,
      log,
      ...(tracing.enabled ? { observer: tracing.observer } : {}),
      tuning: {
        transportStats: () => link.transport.stats,
        tokenExpiresAt: () => link.identity?.expiresAt(),
      },
      metricsExtra: () => ({
        outrigger_trace_spans_dropped: {
          help: 'Spans dropped (queue full or export failed)',
          value: tracing.stats().dropped,
        },
      }),
    });
  } catch (e) {
    await tracing.shutdown();
    link.close();
    throw e;
  }
  log.info('outrigger gateway started', {
    ...gateway.ports(),
    watchNamespace: config.watchNamespace ?? '(all)',
  });
  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) {
        log.warn('second signal: exiting without finishing the drain', { signal });
        process.exit(1);
      }
      stopping = true;
      log.info('shutting down', { signal, drainSeconds: config.drainSeconds });
      void gateway
        .drain(config.drainSeconds * 1000)
        .then(() => Promise.allSettled([gateway.close(), tracing.shutdown()]))
        .then(() => link.close())
        .finally(resolve);
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
}
