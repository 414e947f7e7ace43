import { createRequire } from 'node:module';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { trace, type Tracer } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace';
import { systemClock, type Clock, type Random } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import type { HopObserver } from './hop.ts';
import { noopHop } from './hop.ts';
import { PresetIdGenerator, TracingObserver } from './observer.ts';
import type { PodMeta } from './resource.ts';
import { LiveSampler } from './sampler.ts';
import type * as SdkModule from './sdk.ts';
import type { BatchOptions, Sdk } from './sdk.ts';
import { emptyStats, totalDropped, type TracingStats } from './stats.ts';

export type { PodMeta } from './resource.ts';
export { podMetaFromEnv, POD_ENV, serviceNameOf } from './resource.ts';
export type { TracingStats } from './stats.ts';

export type { BatchOptions } from './sdk.ts';

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
  const ids = new PresetIdGenerator(opts.random);
  let sdk: Sdk | undefined;
  const started = (): Sdk =>
    (sdk ??= loadSdk().startSdk({
      endpoint: opts.endpoint,
      ...(opts.exporter ? { exporter: opts.exporter } : {}),
      ...(opts.batch ? { batch: opts.batch } : {}),
      ...(opts.version ? { version: opts.version } : {}),
      pod: opts.pod,
      sampler,
      ids,
      stats,
      log,
    }));
  const clock = opts.clock ?? systemClock;
  let stopping: Promise<void> | undefined;

  return {
    enabled: true,
    // After shutdown a late sampled hop gets the API's no-op tracer rather than a new SDK.
    observer: new TracingObserver(
      (): Tracer => (stopping && !sdk ? trace.getTracer('outrigger') : started().tracer),
      sampler,
      ids,
    ),
    setSampling(ratio) {
      if (ratio === sampler.ratio) return;
      log.info('trace sampling changed', { from: sampler.ratio, to: ratio });
      sampler.setRatio(ratio);
    },
    sampling: () => sampler.ratio,
    stats: () => ({ ...stats, dropped: totalDropped(stats) }),
    flush: () => sdk?.forceFlush().catch(() => undefined) ?? Promise.resolve(),
    shutdown() {
      stopping ??= bounded(clock, sdk?.shutdown() ?? Promise.resolve(), opts.shutdownTimeoutMs ?? 5_000).then(
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

/**
 * ./sdk.ts, loaded synchronously at the first sampled span: require() of an ES module shares the
 * module graph already loaded (one @opentelemetry/api, one core), and the span that asked for it is
 * recorded like any other. The file is ./sdk.ts in the sources and ./sdk.js once compiled.
 */
function loadSdk(): typeof SdkModule {
  const require = createRequire(import.meta.url);
  return require(
    fileURLToPath(new URL(`./sdk${extname(import.meta.url)}`, import.meta.url)),
  ) as typeof SdkModule;
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
