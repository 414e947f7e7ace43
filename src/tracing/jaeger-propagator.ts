import {
  isSpanContextValid,
  trace,
  TraceFlags,
  type Context,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api';

export const UBER_TRACE_ID = 'uber-trace-id';

const HEX = /^[0-9a-f]+$/i;

/**
 * Jaeger's `uber-trace-id: {trace-id}:{span-id}:{parent-span-id}:{flags}`. The OpenTelemetry
 * Jaeger propagator is only published for SDK 2.x, so this is our own. Jaeger clients drop leading
 * zeros and may send 64-bit trace ids, and some URL-encode the colons; all of that is accepted.
 * Flags bit 1 is "sampled", bit 2 "debug" (which implies sampled). Baggage (`uberctx-*`) is not
 * carried: Outrigger propagates trace context only.
 */
export class JaegerPropagator implements TextMapPropagator {
  inject(context: Context, carrier: unknown, setter: TextMapSetter): void {
    const sc = trace.getSpanContext(context);
    if (!sc || !isSpanContextValid(sc)) return;
    const sampled = (sc.traceFlags & TraceFlags.SAMPLED) !== 0 ? '01' : '00';
    // The parent-span-id field is deprecated in Jaeger; "0" is what its own clients write.
    setter.set(carrier, UBER_TRACE_ID, `${sc.traceId}:${sc.spanId}:0:${sampled}`);
  }

  extract(context: Context, carrier: unknown, getter: TextMapGetter): Context {
    const raw = getter.get(carrier, UBER_TRACE_ID);
    const value = Array.isArray(raw) ? raw[0] : raw;
    if (value === undefined) return context;
    const sc = parseUberTraceId(value);
    return sc ? trace.setSpanContext(context, sc) : context;
  }

  fields(): string[] {
    return [UBER_TRACE_ID];
  }
}

export function parseUberTraceId(value: string): SpanContext | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(value.trim());
  } catch {
    return undefined;
  }
  const parts = decoded.split(':');
  if (parts.length !== 4) return undefined;
  const [traceId = '', spanId = '', , flags = ''] = parts;
  if (!isHex(traceId, 32) || !isHex(spanId, 16) || !isHex(flags, 2)) return undefined;
  const bits = parseInt(flags, 16);
  const sc: SpanContext = {
    traceId: traceId.toLowerCase().padStart(32, '0'),
    spanId: spanId.toLowerCase().padStart(16, '0'),
    traceFlags: bits & 0b11 ? TraceFlags.SAMPLED : TraceFlags.NONE,
    isRemote: true,
  };
  return isSpanContextValid(sc) ? sc : undefined;
}

function isHex(s: string, maxLength: number): boolean {
  return s.length > 0 && s.length <= maxLength && HEX.test(s);
}
