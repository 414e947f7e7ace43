import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  trace,
  TraceFlags,
} from '@opentelemetry/api';
import { JaegerPropagator, parseUberTraceId } from '../../../src/tracing/jaeger-propagator.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';
const p = new JaegerPropagator();

test('extracts a 128-bit uber-trace-id with the sampled flag', () => {
  const ctx = p.extract(ROOT_CONTEXT, { 'uber-trace-id': `${TRACE}:${SPAN}:0:1` }, defaultTextMapGetter);
  assert.deepEqual(trace.getSpanContext(ctx), {
    traceId: TRACE,
    spanId: SPAN,
    traceFlags: TraceFlags.SAMPLED,
    isRemote: true,
  });
});

test('pads 64-bit trace ids and ids without leading zeros, as Jaeger clients send them', () => {
  const sc = parseUberTraceId('a3ce929d0e0e4736:f067aa0ba902b7:0:01');
  assert.equal(sc?.traceId, '0000000000000000a3ce929d0e0e4736');
  assert.equal(sc?.spanId, '00f067aa0ba902b7');
});

test('accepts URL-encoded colons and upper-case hex', () => {
  const sc = parseUberTraceId(`${TRACE.toUpperCase()}%3A${SPAN}%3A0%3A1`);
  assert.equal(sc?.traceId, TRACE);
});

test('debug flag implies sampled; flags 0 is not sampled', () => {
  assert.equal(parseUberTraceId(`${TRACE}:${SPAN}:0:2`)?.traceFlags, TraceFlags.SAMPLED);
  assert.equal(parseUberTraceId(`${TRACE}:${SPAN}:0:0`)?.traceFlags, TraceFlags.NONE);
});

test('rejects malformed values rather than inventing a context', () => {
  for (const bad of [
    '',
    `${TRACE}:${SPAN}:0`,
    `${TRACE}:${SPAN}:0:1:9`,
    `${TRACE}0:${SPAN}:0:1`,
    `${TRACE}:${SPAN}00:0:1`,
    `zz${TRACE.slice(2)}:${SPAN}:0:1`,
    `${'0'.repeat(32)}:${SPAN}:0:1`,
    `${TRACE}:${'0'.repeat(16)}:0:1`,
    `${TRACE}:${SPAN}:0:xyz`,
    '%E0%A4%A',
  ]) {
    assert.equal(parseUberTraceId(bad), undefined, bad);
    const ctx = p.extract(ROOT_CONTEXT, { 'uber-trace-id': bad }, defaultTextMapGetter);
    assert.equal(trace.getSpanContext(ctx), undefined, bad);
  }
});

test('injects trace:span:0:flags and round-trips through extract', () => {
  const carrier: Record<string, string> = {};
  for (const flags of [TraceFlags.SAMPLED, TraceFlags.NONE]) {
    const ctx = trace.setSpanContext(ROOT_CONTEXT, { traceId: TRACE, spanId: SPAN, traceFlags: flags });
    p.inject(ctx, carrier, defaultTextMapSetter);
    assert.equal(carrier['uber-trace-id'], `${TRACE}:${SPAN}:0:0${flags}`);
    const back = trace.getSpanContext(p.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter));
    assert.equal(back?.traceFlags, flags);
  }
});

test('injects nothing without a valid span context', () => {
  const carrier: Record<string, string> = {};
  p.inject(ROOT_CONTEXT, carrier, defaultTextMapSetter);
  assert.deepEqual(carrier, {});
  assert.deepEqual(p.fields(), ['uber-trace-id']);
});
