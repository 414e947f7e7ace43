import { createNoopMeter, type Meter, type MeterProvider } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';

/** Span accounting, read by /metrics. Every sampled span ends up in exactly one bucket. */
export interface TracingStats {
  /** Spans the collector accepted. */
  exported: number;
  /** Spans lost because the batch queue was full (collector slow or down for a while). */
  droppedQueueFull: number;
  /** Spans lost because their export failed (refused, timed out, collector error). */
  droppedExportFailed: number;
}

export function totalDropped(s: TracingStats): number {
  return s.droppedQueueFull + s.droppedExportFailed;
}

export function emptyStats(): TracingStats {
  return { exported: 0, droppedQueueFull: 0, droppedExportFailed: 0 };
}

/**
 * Wraps the OTLP exporter to count what each export achieved and to log the collector's state
 * once per transition (failing, recovered) rather than once per batch: a collector that is down
 * for an hour must not flood the log.
 */
export class CountingExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #stats: TracingStats;
  readonly #log: Logger;
  #failing = false;

  constructor(inner: SpanExporter, stats: TracingStats, log: Logger) {
    this.#inner = inner;
    this.#stats = stats;
    this.#log = log;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    const settle = (result: ExportResult): void => {
      this.#record(spans.length, result);
      done(result);
    };
    try {
      this.#inner.export(spans, settle);
    } catch (e) {
      settle({ code: ExportResultCode.FAILED, error: e instanceof Error ? e : new Error(String(e)) });
    }
  }

  #record(count: number, result: ExportResult): void {
    if (result.code === ExportResultCode.SUCCESS) {
      this.#stats.exported += count;
      if (this.#failing) {
        this.#failing = false;
        this.#log.info('trace export recovered', { droppedSpans: totalDropped(this.#stats) });
      }
      return;
    }
    this.#stats.droppedExportFailed += count;
    if (!this.#failing) {
      this.#failing = true;
      this.#log.warn('trace export failing; spans are dropped until the collector answers', {
        cause: result.error ? errorMessage(result.error) : 'unknown',
      });
    }
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * The batch processor reports queue-full drops only through its self-observability meter (the
 * `otel.sdk.processor.span.processed` counter with `error.type=queue_full`). This provider is a
 * no-op meter except for that one signal, which it turns into a plain number.
 */
export function queueDropMeterProvider(stats: TracingStats): MeterProvider {
  const noop = createNoopMeter();
  const meter = Object.create(noop) as Meter;
  // A fresh object, never the no-op meter's shared counter instance, which others may use.
  meter.createCounter = () => ({
    add: (value, attributes) => {
      if (attributes?.['error.type'] === 'queue_full') stats.droppedQueueFull += value;
    },
  });
  return { getMeter: () => meter };
}
