/**
 * `outrigger gateway`: an Ingress controller built from the sidecar's parts. Discovery reads
 * Ingresses, IngressClasses and TLS Secrets (src/gateway/store.ts) and Services and EndpointSlices
 * (the sidecar's resolver) over ONE API connection; requests go through the sidecar's forwarder,
 * balancer, retry budget and outlier ejection; metrics and a SERVER span per request.
 * startGateway() wires it from a validated configuration (tests use it directly); gateway-run.ts
 * adds the process concerns: tracing, signals and the drain.
 */
import { AdminServer } from '../admin/server.ts';
import { Metrics } from '../admin/metrics.ts';
import type { KubeApi } from '../kube/api.ts';
import type { KubeResolver } from '../discovery/resolver.ts';
import { assignPodPorts } from '../gateway/addresses.ts';
import { Certificates } from '../gateway/certs.ts';
import { GatewayPorts } from '../gateway/gateway-ports.ts';
import type { Via } from '../gateway/http-route.ts';
import { IngressGatewayHandler } from '../gateway/handler.ts';
import { GatewayListeners } from '../gateway/listeners.ts';
import type { GatewayConfig } from '../config/gateway-options.ts';
import type { GatewayStore } from '../gateway/store.ts';
import type { GatewayRouteTable } from '../routes/table.ts';
import { H2Forwarder } from '../proxy/h2/forward.ts';
import { H2SessionPool } from '../proxy/h2/session-pool.ts';
import { metricsObserver } from '../proxy/metrics-observer.ts';
import { combineObservers, type HopObserver } from '../proxy/observer.ts';
import { defaultLimits, type ServerLimits } from '../proxy/server.ts';
import { systemClock, systemRandom, type Clock, type Random } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import { discoveryGauges } from './discovery.ts';
import { openGatewayDiscovery, type GatewayDiscoveryDeps } from './gateway-discovery.ts';
import { openGatewayMesh } from './mesh.ts';
import { createUpstream } from './upstream.ts';

/** Attempts per request: the first plus two retries, as the sidecar (Istio's default policy). */
const MAX_ATTEMPTS = 3;

export interface GatewayDeps {
  api: KubeApi;
  clock?: Clock;
  random?: Random;
  /** The draws of weighted backendRefs (default: random); tests make a split exact. */
  weightDraw?: Random;
  log: Logger;
  /** Tracing's observer; metrics are always observed. */
  observer?: HopObserver;
  limits?: Partial<ServerLimits>;
  /** Tuning for tests (backoff, timeouts, debounce); production uses the defaults. */
  tuning?: GatewayDiscoveryDeps['tuning'] & { discoveryWaitMs?: number };
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
  // The listeners exist only after discovery; until then a new table has no default to refresh
  // and no Gateway port to open.
  const tls = { refreshDefault: (): void => {} };
  let gatewayPorts: GatewayPorts | undefined;
  const bindGateways = (routes: GatewayRouteTable): void =>
    void gatewayPorts?.bind(assignPodPorts(routes.gateways().values()));
  const discovery = await openGatewayDiscovery(
    config,
    { ...deps, clock, random },
    (table, secrets, routes) => {
      certs.update(table, secrets, config.defaultCertificate, routes);
      tls.refreshDefault();
      bindGateways(routes);
    },
  );
  const { store, resolver } = discovery;
  const mesh = await openGatewayMesh(config, { clock, log });
  const { balancers, upstream, forwarder } = createUpstream(config, {
    metrics,
    log,
    clock,
    random,
    ...(mesh ? { dial: mesh.dial } : {}),
  });
  // h2c backends (appProtocol kubernetes.io/h2c) of HTTP/2 clients: sessions pooled per endpoint.
  const h2Pool = new H2SessionPool({
    clock,
    connectTimeoutMs: config.connectTimeoutMs,
    ...(mesh ? { dial: mesh.dial } : {}),
  });
  const h2Forwarder = new H2Forwarder({
    pool: h2Pool,
    clock,
    responseTimeoutMs: config.requestTimeoutMs,
    idleTimeoutMs: config.idleTimeoutMs,
  });
  // Gateway hops are counted under their own direction label; tracing sees them as SERVER spans.
  const gatewayMetrics = {
    // No mesh identity at the edge: the caller label stays empty.
    request: (_d: string, service: string, _c: string, status: number, error: string, s: number) =>
      metrics.request('gateway', service, '', status, error, s),
    retry: (_d: string, service: string, reason: string) => metrics.retry('gateway', service, reason),
    grpcCall: (_d: string, service: string, grpcStatus: number) =>
      metrics.grpcCall('gateway', service, grpcStatus),
  };
  const observer = combineObservers(
    metricsObserver(gatewayMetrics, clock),
    ...(deps.observer ? [deps.observer] : []),
  );
  const handler = new IngressGatewayHandler({
    table: () => store.table(),
    routes: () => store.routeTable(),
    via: (localPort): Via | undefined => ports?.via(localPort),
    random: deps.weightDraw ?? random,
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
    h2Forwarder,
    observer,
    log: log.child({ listener: 'gateway' }),
    clock,
  });
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
  tls.refreshDefault = () => listeners.refreshDefaultCertificate();
  tls.refreshDefault();
  // Each Gateway's own pod ports, when the Gateways have addresses of their own.
  const ports = discovery.services
    ? new GatewayPorts({ host: config.listenHost, accept: listeners.accept(), log })
    : undefined;
  metrics.setSources({
    discovery: () => discoveryGauges(resolver.status(), clock.now()),
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
        outrigger_gateway_conflicts: {
          help: 'Rules, defaults, certificates or hosts of an Ingress not served because an older Ingress has them',
          value: g.conflicts,
        },
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
      const certified = mesh?.ready() ?? true;
      return {
        ready: g.ready && certified && !draining,
        detail: {
          gateway: { ready: g.ready, routes: g.routes, stale: g.stale.length },
          ...(mesh ? { meshCertificate: certified } : {}),
          draining,
        },
      };
    },
    metrics,
    debug: {
      gateway: () => store.status(),
      discovery: () => resolver.status(),
      certificates: () => certs.served(),
      ...(ports ? { gatewayPorts: () => ports.listening() } : {}),
      config: () => config,
      balancer: () => balancers.view(),
      upstream: () => ({ ...upstream.stats(), h2: h2Pool.stats() }),
      ...(mesh ? { identity: () => mesh.view() } : {}),
    },
  });
  const closeAll = async (): Promise<void> => {
    ports?.close();
    listeners.close();
    upstream.close();
    h2Pool.close();
    mesh?.close();
    await Promise.allSettled([admin.close(), discovery.close()]);
  };
  try {
    await listeners.start();
    gatewayPorts = ports;
    if (ports) await ports.bind(assignPodPorts(store.routeTable().gateways().values()));
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
      ports?.close();
      await l.drain(graceMs);
    },
    close: closeAll,
  };
}
