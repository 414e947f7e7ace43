import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BatchSpanProcessor, TracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace';
import { systemClock, type Clock, type Random } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import type { HopObserver } from './hop.ts';
import { noopHop } from './hop.ts';
import { PresetIdGenerator, TracingObserver } from './observer.ts';
import { podResource, type PodMeta } from './resource.ts';
import { LiveSampler } from './sampler.ts';
import {
  CountingExporter,
  emptyStats,
  queueDropMeterProvider,
  totalDropped,
  type TracingStats,
} from './stats.ts';

export type { PodMeta } from './resource.ts';
export { podMetaFromEnv, POD_ENV, serviceNameOf } from './resource.ts';
export type { TracingStats } from './stats.ts';

export interface BatchOptions {
  /** Spans buffered while the collector is slow or down; beyond it they are dropped and counted. */
  maxQueueSize?: number;
  maxExportBatchSize?: number;
  scheduledDelayMillis?: number;
  exportTimeoutMillis?: number;
}

export interface TracingOptions {
  /** OTLP/HTTP collector base URL (`/v1/traces` is appended) or the full traces URL; unset: off. */
  endpoint: string | undefined;
  /** Parent-based ratio for new traces; 0 means no spans at all. */
  sampling: number;
  pod: PodMeta;
  logger: Logger;
  /** The sidecar's version, as the instrumentation scope version. */
  version?: string;
  batch?: BatchOptions;
  /** Bound on the final flush: shutdown must not wait for a dead collector. */
  shutdownTimeoutMs?: number;
  clock?: Clock;
  /** Source of trace and span ids, hence of root sampling decisions (tests make it deterministic). */
  random?: Random;
  /** Replaces the OTLP exporter (tests). */
  exporter?: SpanExporter;
}

export interface Tracing {
  readonly enabled: boolean;
  /** Structurally the proxy's HopObserver (src/proxy/observer.ts); src/compose/ passes it through. */
  readonly observer: HopObserver;
  /** Live option: re-applied without a restart when the annotation changes. */
  setSampling(ratio: number): void;
  sampling(): number;
  stats(): TracingStats & { dropped: number };
  /** Exports what is buffered now (tests, admin). */
  flush(): Promise<void>;
  /** Flushes buffered spans (bounded by shutdownTimeoutMs) and stops exporting. Idempotent. */
  shutdown(): Promise<void>;
}

/**
 * The composition root's one call for tracing: `createTracing(options)` returns the hop observer to
 * hand to the proxy, the live sampling setter, span counters for /metrics and shutdown.
 * Nothing is registered globally (no global tracer provider, no context manager): the sidecar
 * passes contexts explicitly, so tracing cannot leak into libraries' own instrumentation.
 */
export function createTracing(opts: TracingOptions): Tracing {
  if (opts.endpoint === undefined && opts.exporter === undefined) return disabledTracing();
  const log = opts.logger.child({ component: 'tracing' });
  const stats = emptyStats();
  const sampler = new LiveSampler(opts.sampling);
  const exporter = new CountingExporter(
    opts.exporter ?? otlpExporter(opts.endpoint ?? '', opts.batch?.exportTimeoutMillis),
    stats,
    log,
  );
  const batch = opts.batch ?? {};
  const processor = new BatchSpanProcessor({
    exporter,
    maxQueueSize: batch.maxQueueSize ?? 2048,
    maxExportBatchSize: batch.maxExportBatchSize ?? 512,
    scheduledDelayMillis: batch.scheduledDelayMillis ?? 2000,
    exportTimeoutMillis: batch.exportTimeoutMillis ?? 10_000,
    selfObsMeterProvider: queueDropMeterProvider(stats),
  });
  const ids = new PresetIdGenerator(opts.random);
  const provider = new TracerProvider({
    resource: podResource(opts.pod),
    sampler,
    idGenerator: ids,
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('outrigger', opts.version);
  const clock = opts.clock ?? systemClock;
  let stopping: Promise<void> | undefined;

  return {
    enabled: true,
    observer: new TracingObserver(tracer, sampler, ids),
    setSampling(ratio) {
      if (ratio === sampler.ratio) return;
      log.info('trace sampling changed', { from: sampler.ratio, to: ratio });
      sampler.setRatio(ratio);
    },
    sampling: () => sampler.ratio,
    stats: () => ({ ...stats, dropped: totalDropped(stats) }),
    flush: () => provider.forceFlush().catch(() => undefined),
    shutdown() {
      stopping ??= bounded(clock, provider.shutdown(), opts.shutdownTimeoutMs ?? 5_000).then(
        (finished) => {
          if (!finished) log.warn('trace flush on shutdown timed out; buffered spans are lost');
          else log.info('tracing stopped', { ...stats });
        },
        (e: unknown) => log.warn('trace flush on shutdown failed', { cause: errorMessage(e) }),
      );
      return stopping;
    },
  };
}

/** Tracing switched off (no collector configured): a hop costs nothing, headers pass untouched. */
export function disabledTracing(): Tracing {
  return {
    enabled: false,
    observer: { startHop: () => noopHop },
    setSampling: () => {},
    sampling: () => 0,
    stats: () => ({ ...emptyStats(), dropped: 0 }),
    flush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
}

/** `http://collector:4318` -> `http://collector:4318/v1/traces`; a full traces URL is kept. */
export function tracesUrl(endpoint: string): string {
  const u = new URL(endpoint);
  if (!u.pathname.endsWith('/v1/traces')) u.pathname = u.pathname.replace(/\/?$/, '/v1/traces');
  return u.toString();
}

function otlpExporter(endpoint: string, timeoutMillis = 10_000): SpanExporter {
  return new OTLPTraceExporter({
    url: tracesUrl(endpoint),
    timeoutMillis,
    keepAlive: true,
    // One export at a time is what the batch processor does anyway; a low limit keeps a slow
    // collector from holding dozens of sockets open in every pod.
    concurrencyLimit: 2,
  });
}

async function bounded(clock: Clock, work: Promise<void>, ms: number): Promise<boolean> {
  const timeout = new AbortController();
  const timer = clock.sleep(ms, timeout.signal).then(
    () => false,
    () => true,
  );
  try {
    return await Promise.race([work.then(() => true), timer]);
  } finally {
    timeout.abort();
  }
}
