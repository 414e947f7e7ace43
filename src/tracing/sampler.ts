import {
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Link,
  type SpanKind,
} from '@opentelemetry/api';
import type { Sampler, SamplingDecision, SamplingResult } from '@opentelemetry/sdk-trace';

/** SamplingDecision's values, written here so that deciding never loads the SDK (./sdk.ts). */
export const NOT_RECORD = 0 as SamplingDecision.NOT_RECORD;
export const RECORD_AND_SAMPLED = 2 as SamplingDecision.RECORD_AND_SAMPLED;

const SKIP: SamplingResult = Object.freeze({ decision: NOT_RECORD });
const KEEP: SamplingResult = Object.freeze({ decision: RECORD_AND_SAMPLED });

/**
 * Parent-based ratio sampling whose ratio can change while the sidecar runs (the
 * `outrigger.dev/trace-sampling` annotation is a live option). A request that arrives with a
 * sampling decision keeps it, so a trace is never cut in half between two sidecars; only new
 * traces are sampled at the ratio. The tracer provider fixes its sampler at construction, hence
 * a mutable sampler rather than a new provider per change.
 *
 * New traces are decided as OpenTelemetry's trace-id ratio sampler decides them (the xor of the
 * id's four 32-bit words below ratio x (2^32 - 1)), so a sidecar and an SDK-instrumented app agree.
 */
export class LiveSampler implements Sampler {
  #ratio = 0;
  #bound = 0;

  constructor(ratio: number) {
    this.setRatio(ratio);
  }

  get ratio(): number {
    return this.#ratio;
  }

  setRatio(ratio: number): void {
    const r = Number.isFinite(ratio) ? Math.min(1, Math.max(0, ratio)) : 0;
    this.#ratio = r;
    // at 1 every id passes, even the one whose words fold to 2^32 - 1
    this.#bound = r === 1 ? 2 ** 32 : Math.floor(r * 0xffffffff);
  }

  shouldSample(
    context: Context,
    traceId: string,
    _spanName?: string,
    _spanKind?: SpanKind,
    _attributes?: Attributes,
    _links?: Link[],
  ): SamplingResult {
    const parent = trace.getSpanContext(context);
    if (parent && trace.isSpanContextValid(parent))
      return (parent.traceFlags & TraceFlags.SAMPLED) !== 0 ? KEEP : SKIP;
    return this.#ratio > 0 && foldTraceId(traceId) < this.#bound ? KEEP : SKIP;
  }

  toString(): string {
    return `LiveSampler{ratio=${this.#ratio}}`;
  }
}

/** The xor of a 32-hex-digit trace id's four 32-bit words, unsigned. */
function foldTraceId(traceId: string): number {
  let acc = 0;
  for (let i = 0; i + 8 <= traceId.length; i += 8) acc = (acc ^ parseInt(traceId.slice(i, i + 8), 16)) >>> 0;
  return acc;
}
