import type { Tracer } from '@opentelemetry/api';
import { noopHop, type Hop, type HopObserver, type HopStart } from './hop.ts';
import type { LiveSampler } from './sampler.ts';
import { SpanHop } from './span-hop.ts';

/**
 * The tracing HopObserver. At ratio 0 a hop costs one comparison: no header parsing, no span, no
 * header rewriting (headers the app sent pass through untouched). Above 0, every hop extracts and
 * injects context even when unsampled, so downstream sidecars see a consistent decision.
 */
export class TracingObserver implements HopObserver {
  readonly #tracer: Tracer;
  readonly #sampler: LiveSampler;

  constructor(tracer: Tracer, sampler: LiveSampler) {
    this.#tracer = tracer;
    this.#sampler = sampler;
  }

  startHop(info: HopStart): Hop {
    if (this.#sampler.ratio === 0) return noopHop;
    return new SpanHop(this.#tracer, info);
  }
}
