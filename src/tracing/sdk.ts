/**
 * The OpenTelemetry SDK half of tracing: the tracer provider, the batch processor, the OTLP
 * exporter and the pod's resource. src/tracing/index.ts loads this module at the first sampled
 * span, not at start: deciding and propagating never need it, and at the default ratio an idle
 * sidecar would otherwise carry it (~5 MB of private memory) in every pod.
 */
import type { Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace';
import {
  ATTR_K8S_NAMESPACE_NAME,
  ATTR_K8S_NODE_NAME,
  ATTR_K8S_POD_NAME,
  ATTR_SERVICE_NAME,
} from '@opentelemetry/semantic-conventions';
import type { Logger } from '../shared/log.ts';
import type { PresetIdGenerator } from './observer.ts';
import { serviceNameOf, type PodMeta } from './resource.ts';
import type { LiveSampler } from './sampler.ts';
import { CountingExporter, queueDropMeterProvider, type TracingStats } from './stats.ts';

export interface BatchOptions {
  /** Spans buffered while the collector is slow or down; beyond it they are dropped and counted. */
  maxQueueSize?: number;
  maxExportBatchSize?: number;
  scheduledDelayMillis?: number;
  exportTimeoutMillis?: number;
}

export interface SdkOptions {
  endpoint: string | undefined;
  exporter?: SpanExporter;
  batch?: BatchOptions;
  pod: PodMeta;
  version?: string;
  sampler: LiveSampler;
  ids: PresetIdGenerator;
  stats: TracingStats;
  log: Logger;
}

export interface Sdk {
  tracer: Tracer;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

export function startSdk(o: SdkOptions): Sdk {
  const batch = o.batch ?? {};
  const exporter = new CountingExporter(
    o.exporter ?? otlpExporter(o.endpoint ?? '', batch.exportTimeoutMillis),
    o.stats,
    o.log,
  );
  const processor = new BatchSpanProcessor({
    exporter,
    maxQueueSize: batch.maxQueueSize ?? 2048,
    maxExportBatchSize: batch.maxExportBatchSize ?? 512,
    scheduledDelayMillis: batch.scheduledDelayMillis ?? 2000,
    exportTimeoutMillis: batch.exportTimeoutMillis ?? 10_000,
    selfObsMeterProvider: queueDropMeterProvider(o.stats),
  });
  const provider = new TracerProvider({
    resource: podResource(o.pod),
    sampler: o.sampler,
    idGenerator: o.ids,
    spanProcessors: [processor],
  });
  return {
    tracer: provider.getTracer('outrigger', o.version),
    forceFlush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
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

export function podResource(pod: PodMeta): Resource {
  const attrs: Record<string, string> = { [ATTR_SERVICE_NAME]: serviceNameOf(pod) };
  if (pod.namespace) attrs[ATTR_K8S_NAMESPACE_NAME] = pod.namespace;
  if (pod.name) attrs[ATTR_K8S_POD_NAME] = pod.name;
  if (pod.nodeName) attrs[ATTR_K8S_NODE_NAME] = pod.nodeName;
  return resourceFromAttributes(attrs);
}
