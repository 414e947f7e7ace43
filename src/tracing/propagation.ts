import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import {
  ROOT_CONTEXT,
  trace,
  type Context,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { B3InjectEncoding, B3Propagator } from '@opentelemetry/propagator-b3';
import { JaegerPropagator, UBER_TRACE_ID } from './jaeger-propagator.ts';

/** The header formats Outrigger reads and writes. */
export type Format = 'w3c' | 'b3-single' | 'b3-multi' | 'jaeger';
export const formats: readonly Format[] = ['w3c', 'b3-single', 'b3-multi', 'jaeger'];

/** What a request carried: the parent context to continue and the formats it was written in. */
export interface Extracted {
  context: Context;
  /** Formats whose headers were present (even if another format's context was used). */
  present: readonly Format[];
}

const propagators: Record<Format, TextMapPropagator> = {
  w3c: new W3CTraceContextPropagator(),
  'b3-single': new B3Propagator({ injectEncoding: B3InjectEncoding.SINGLE_HEADER }),
  'b3-multi': new B3Propagator({ injectEncoding: B3InjectEncoding.MULTI_HEADER }),
  jaeger: new JaegerPropagator(),
};

/** The header whose presence says a request was written in a format. */
const marker: Record<Format, string> = {
  w3c: 'traceparent',
  'b3-single': 'b3',
  'b3-multi': 'x-b3-traceid',
  jaeger: UBER_TRACE_ID,
};

const getter: TextMapGetter<IncomingHttpHeaders> = {
  get: (carrier, key) => carrier[key],
  keys: (carrier) => Object.keys(carrier),
};

const setter: TextMapSetter<OutgoingHttpHeaders> = {
  set: (carrier, key, value) => void (carrier[key] = value),
};

const NONE: Extracted = Object.freeze({ context: ROOT_CONTEXT, present: Object.freeze([]) });

/**
 * Extracts the parent context from the first valid format in priority order: W3C (the standard),
 * then B3 single, B3 multi, then Jaeger. Linkerd and Istio's Zipkin mode also prefer W3C when a
 * request carries several. A malformed header of one format does not hide a valid one of another.
 */
export function extract(headers: IncomingHttpHeaders): Extracted {
  // Most requests carry no trace header at all: no array, no context for them.
  if (
    headers.traceparent === undefined &&
    headers.b3 === undefined &&
    headers['x-b3-traceid'] === undefined &&
    headers[UBER_TRACE_ID] === undefined
  )
    return NONE;
  const present = formats.filter((f) => headers[marker[f]] !== undefined);
  for (const f of present) {
    const ctx = propagators[f].extract(ROOT_CONTEXT, headers, getter);
    if (trace.getSpanContext(ctx)) return { context: ctx, present };
  }
  return { context: ROOT_CONTEXT, present };
}

/**
 * Writes the span's context in every format the incoming request used, so an app that speaks B3
 * or Jaeger keeps receiving what it understands and no stale header of another format survives
 * to mislead the next hop. A request that carried none gets `fallback` (W3C by default).
 */
export function inject(
  ctx: Context,
  present: readonly Format[],
  headers: OutgoingHttpHeaders,
  fallback: readonly Format[] = ['w3c'],
): void {
  const targets = present.length > 0 ? present : fallback;
  for (const f of targets) {
    // B3 multi has an optional parent-span-id header that the propagator never writes; a copy
    // forwarded from the incoming request would name the wrong parent.
    if (f === 'b3-multi') delete headers['x-b3-parentspanid'];
    propagators[f].inject(ctx, headers, setter);
  }
}

/**
 * The W3C headers of an unsampled span context, written directly: what the W3C propagator writes
 * for it, without building an OpenTelemetry context per request. Returns false when the request
 * used another format, which only the propagators write. (A request without trace headers gets W3C.)
 */
export function injectUnsampledW3c(
  sc: SpanContext,
  present: readonly Format[],
  headers: OutgoingHttpHeaders,
): boolean {
  if (present.length > 1 || (present.length === 1 && present[0] !== 'w3c')) return false;
  headers.traceparent = `00-${sc.traceId}-${sc.spanId}-00`;
  if (sc.traceState) headers.tracestate = sc.traceState.serialize();
  return true;
}
