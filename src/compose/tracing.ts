/**
 * Tracing for any command that proxies: the OpenTelemetry exporter from the configuration, and the
 * span-drop counter it adds to /metrics. Only the compositions import this file, never
 * data-path.ts: the SDK and exporter cost ~17 MB RSS, which the demo and tests of the data path do
 * not need.
 */
import type { Config } from '../config/options.ts';
import type { Logger } from '../shared/log.ts';
import { createTracing, podMetaFromEnv, type PodMeta, type Tracing } from '../tracing/index.ts';

export function openTracing(
  config: Pick<Config, 'traceEndpoint' | 'traceSampling' | 'serviceName'>,
  deps: { env: Record<string, string | undefined>; labels: Record<string, string>; log: Logger },
): { tracing: Tracing; pod: PodMeta } {
  const pod = podMetaFromEnv(deps.env);
  const tracing = createTracing({
    endpoint: config.traceEndpoint,
    sampling: config.traceSampling,
    pod: {
      ...pod,
      labels: deps.labels,
      ...(config.serviceName ? { serviceName: config.serviceName } : {}),
    },
    logger: deps.log,
  });
  return { tracing, pod };
}

/** The tracer's own health on /metrics. */
export function tracingMetrics(tracing: Tracing): () => Record<string, { help: string; value: number }> {
  return () => {
    const t = tracing.stats();
    return {
      outrigger_trace_spans_dropped: {
        help: 'Spans dropped (queue full or export failed)',
        value: t.dropped,
      },
    };
  };
}
