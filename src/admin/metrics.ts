import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { outriggerVersion } from '../shared/app-root.ts';
import { registerEventLoopDelay } from './event-loop.ts';
import { GrpcCallCounter, LatencyHistogram, RequestCounter } from './request-metrics.ts';

/**
 * The sidecar's Prometheus metrics. Names follow Istio's and Linkerd's shapes (requests by
 * direction/service/status, latency histograms) under an outrigger_ prefix. The proxy feeds it
 * through its own narrow sink port (src/proxy/metrics-observer.ts); discovery and tracing figures
 * are read at scrape time.
 */
export interface DiscoveryGauges {
  ready: boolean;
  subscriptions: number;
  watches: number;
  staleServices: number;
  /** Seconds since the oldest stale entry went stale; 0 when nothing is stale. */
  oldestStaleSeconds: number;
}

export interface MetricsSources {
  discovery?: () => DiscoveryGauges;
  /** Extra gauges read at scrape time (e.g. tracing span counters, token expiry). */
  extra?: () => Record<string, { help: string; value: number }>;
}

/** What every Outrigger process exports: build info, and (unless off) Node's process metrics. */
export function registerProcessMetrics(registry: Registry, defaults: boolean): void {
  // prom-client's names already start with process_ or nodejs_: the prefix is ours alone.
  if (defaults) collectDefaultMetrics({ register: registry, prefix: 'outrigger_' });
  // The build-info convention (a constant 1 carrying the version as a label): `outrigger
  // version --admin URL` reads it, and dashboards can join on it.
  new Gauge({
    name: 'outrigger_build_info',
    help: 'Always 1; the labels carry the Outrigger and Node.js versions',
    labelNames: ['version', 'node'],
    registers: [registry],
  }).set({ version: outriggerVersion, node: process.version }, 1);
}

export class Metrics {
  readonly registry = new Registry();
  readonly #requests: RequestCounter;
  readonly #latency: LatencyHistogram;
  readonly #connectErrors: Counter<'service'>;
  readonly #ejections: Counter<'service'>;
  readonly #retries: Counter<'direction' | 'service' | 'reason'>;
  readonly #grpcCalls: GrpcCallCounter;
  readonly #extraGauges = new Map<string, Gauge>();
  #sources: MetricsSources = {};

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    registerProcessMetrics(this.registry, opts.defaultMetrics !== false);
    this.#requests = new RequestCounter(
      'outrigger_requests_total',
      'Requests and streams proxied, by direction, Service ("" for passthrough), caller (ingress: namespace/serviceaccount over mutual TLS, else unauthenticated), status and proxy error code',
    );
    this.#latency = new LatencyHistogram(
      'outrigger_request_duration_seconds',
      'Time from request received to response finished',
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    );
    this.#connectErrors = new Counter({
      name: 'outrigger_upstream_connect_errors_total',
      help: 'Failed connects to upstream endpoints',
      labelNames: ['service'],
      registers,
    });
    this.#ejections = new Counter({
      name: 'outrigger_endpoint_ejections_total',
      help: 'Endpoints ejected by outlier detection',
      labelNames: ['service'],
      registers,
    });
    this.#retries = new Counter({
      name: 'outrigger_retries_total',
      help: 'Retried attempts, by reason',
      labelNames: ['direction', 'service', 'reason'],
      registers,
    });
    this.#grpcCalls = new GrpcCallCounter(
      'outrigger_grpc_calls_total',
      "gRPC calls proxied, by direction, Service and gRPC status (the upstream's, or the proxy's own)",
    );
    const sources = (): MetricsSources => this.#sources;
    const gauge = (name: string, help: string, read: (d: DiscoveryGauges) => number): void => {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const d = sources().discovery?.();
          if (d) this.set(read(d));
        },
      });
    };
    gauge('outrigger_discovery_ready', '1 once discovery can route (latched)', (d) => (d.ready ? 1 : 0));
    gauge('outrigger_discovery_subscriptions', 'Services subscribed to', (d) => d.subscriptions);
    gauge('outrigger_discovery_watches', 'Live watches on the API server', (d) => d.watches);
    gauge(
      'outrigger_discovery_stale_services',
      'Services served from last-known-good data',
      (d) => d.staleServices,
    );
    gauge(
      'outrigger_discovery_staleness_seconds',
      'Age of the oldest stale discovery entry',
      (d) => d.oldestStaleSeconds,
    );
    registerEventLoopDelay(this.registry);
  }

  setSources(sources: MetricsSources): void {
    this.#sources = sources;
  }

  request(
    direction: string,
    service: string,
    caller: string,
    status: number,
    error: string,
    seconds: number,
  ): void {
    this.#requests.inc(direction, service, caller, status, error);
    this.#latency.observe(direction, service, caller, seconds);
  }

  /** A request refused by the listener limits before routing: counted, with no latency sample. */
  rejected(direction: string, status: number, error: string): void {
    this.#requests.inc(direction, '', '', status, error);
  }

  grpcCall(direction: string, service: string, grpcStatus: number): void {
    this.#grpcCalls.inc(direction, service, knownGrpcStatus(grpcStatus));
  }

  retry(direction: string, service: string, reason: string): void {
    this.#retries.inc({ direction, service, reason });
  }

  connectError(service: string): void {
    this.#connectErrors.inc({ service });
  }

  ejection(service: string): void {
    this.#ejections.inc({ service });
  }

  async render(): Promise<string> {
    for (const [name, { help, value }] of Object.entries(this.#sources.extra?.() ?? {})) {
      let g = this.#extraGauges.get(name);
      if (!g) {
        g = new Gauge({ name, help, registers: [this.registry] });
        this.#extraGauges.set(name, g);
      }
      g.set(value);
    }
    // prom-client's text ends in a newline; metric blocks are separated by a blank line.
    const own = [await this.#grpcCalls.render(), await this.#requests.render(), await this.#latency.render()];
    return `${await this.registry.metrics()}\n${own.join('\n\n')}\n`;
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

/**
 * The status as a label value: an upstream decides the code, so one that sends codes outside the
 * 17 defined would otherwise grow a series per code. gRPC clients treat such a code as UNKNOWN (2).
 */
const GRPC_UNKNOWN = 2;
const GRPC_MAX_CODE = 16;
function knownGrpcStatus(code: number): number {
  return Number.isInteger(code) && code >= 0 && code <= GRPC_MAX_CODE ? code : GRPC_UNKNOWN;
}
