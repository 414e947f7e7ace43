import type { Attributes, Context, Link, SpanKind } from '@opentelemetry/api';
import {
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SamplingResult,
} from '@opentelemetry/sdk-trace';

/**
 * Parent-based ratio sampling whose ratio can change while the sidecar runs (the
 * `outrigger.dev/trace-sampling` annotation is a live option). A request that arrives with a
 * sampling decision keeps it, so a trace is never cut in half between two sidecars; only new
 * traces are sampled at the ratio. The tracer provider fixes its sampler at construction, hence
 * this indirection rather than a new provider per change.
 */
export class LiveSampler implements Sampler {
  #ratio = 0;
  #inner: Sampler = build(0);

  constructor(ratio: number) {
    this.setRatio(ratio);
  }

  get ratio(): number {
    return this.#ratio;
  }

  setRatio(ratio: number): void {
    const r = Number.isFinite(ratio) ? Math.min(1, Math.max(0, ratio)) : 0;
    if (r === this.#ratio) return;
    this.#ratio = r;
    this.#inner = build(r);
  }

  shouldSample(
    context: Context,
    traceId: string,
    spanName: string,
    spanKind: SpanKind,
    attributes: Attributes,
    links: Link[],
  ): SamplingResult {
    return this.#inner.shouldSample(context, traceId, spanName, spanKind, attributes, links);
  }

  toString(): string {
    return `LiveSampler{${this.#inner.toString()}}`;
  }
}

function build(ratio: number): Sampler {
  return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
}
