import type { OutgoingHttpHeaders } from 'node:http';
import { ROOT_CONTEXT, SpanKind, trace, TraceFlags, type SpanContext, type Tracer } from '@opentelemetry/api';
import type { IdGenerator } from '@opentelemetry/sdk-trace';
import { systemRandom, type Random } from '../shared/clock.ts';
import { noopHop, type Hop, type HopObserver, type HopStart } from './hop.ts';
import { extract, inject, injectUnsampledW3c, type Extracted } from './propagation.ts';
import { NOT_RECORD, type LiveSampler } from './sampler.ts';
import { SpanHop } from './span-hop.ts';

/**
 * The tracing HopObserver. At ratio 0 a hop costs one comparison: no header parsing, no span, no
 * header rewriting (headers the app sent pass through untouched). Above 0, every hop extracts and
 * injects context even when unsampled, so downstream sidecars see a consistent decision.
 *
 * Unsampled hops (99 % at the default ratio) skip the SDK: the sampling decision is taken here,
 * with the same sampler the SDK uses, and only the context is propagated. A sampled new trace
 * keeps the trace id the decision was made on (PresetIdGenerator), so the ratio is applied once.
 */
export class TracingObserver implements HopObserver {
  /** Loads the SDK on first use (src/tracing/sdk.ts): unsampled hops never call it. */
  readonly #tracer: () => Tracer;
  readonly #sampler: LiveSampler;
  readonly #ids: PresetIdGenerator;

  constructor(tracer: () => Tracer, sampler: LiveSampler, ids: PresetIdGenerator) {
    this.#tracer = tracer;
    this.#sampler = sampler;
    this.#ids = ids;
  }

  startHop(info: HopStart): Hop {
    if (this.#sampler.ratio === 0) return noopHop;
    const parent = extract(info.headers);
    const psc = trace.getSpanContext(parent.context);
    if (psc) {
      if ((psc.traceFlags & TraceFlags.SAMPLED) === 0) return this.#unsampled(psc.traceId, parent, psc);
      return new SpanHop(this.#tracer(), info, parent);
    }
    const traceId = this.#ids.generateTraceId();
    const kind = info.direction === 'egress' ? SpanKind.CLIENT : SpanKind.SERVER;
    const decision = this.#sampler.shouldSample(ROOT_CONTEXT, traceId, info.method, kind, {}, []).decision;
    if (decision === NOT_RECORD) return this.#unsampled(traceId, parent);
    this.#ids.preset(traceId);
    return new SpanHop(this.#tracer(), info, parent);
  }

  #unsampled(traceId: string, parent: Extracted, psc?: SpanContext): Hop {
    const sc: SpanContext = { traceId, spanId: this.#ids.generateSpanId(), traceFlags: TraceFlags.NONE };
    if (psc?.traceState) sc.traceState = psc.traceState;
    return new PropagatingHop(sc, parent);
  }
}

/** An unsampled hop: nothing is recorded, the context (with a new span id) is passed on. */
class PropagatingHop implements Hop {
  readonly #sc: SpanContext;
  readonly #present: Extracted['present'];

  constructor(sc: SpanContext, parent: Extracted) {
    this.#sc = sc;
    this.#present = parent.present;
  }

  setService(): void {}
  setEndpoint(): void {}
  addRetry(): void {}
  setStale(): void {}
  end(): void {}

  inject(headers: OutgoingHttpHeaders): void {
    if (!injectUnsampledW3c(this.#sc, this.#present, headers))
      inject(trace.setSpanContext(ROOT_CONTEXT, this.#sc), this.#present, headers);
  }
}

const ID_BUFFER = Buffer.alloc(16);

/** Random ids, except that the next trace id can be fixed (the one a sampling decision was made on). */
export class PresetIdGenerator implements IdGenerator {
  readonly #random: Random;
  #next: string | undefined;

  constructor(random: Random = systemRandom) {
    this.#random = random;
  }

  preset(traceId: string): void {
    this.#next = traceId;
  }

  generateTraceId(): string {
    const id = this.#next ?? this.#hex(4);
    this.#next = undefined;
    return id;
  }

  generateSpanId(): string {
    return this.#hex(2);
  }

  /** `words` random 32-bit words as hex; never all zeros (an invalid id). */
  #hex(words: number): string {
    let zero = true;
    for (let i = 0; i < words; i++) {
      const w = (this.#random() * 2 ** 32) >>> 0;
      if (w !== 0) zero = false;
      ID_BUFFER.writeUInt32BE(w, i * 4);
    }
    if (zero) ID_BUFFER[words * 4 - 1] = 1;
    return ID_BUFFER.toString('hex', 0, words * 4);
  }
}
