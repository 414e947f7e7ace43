import assert from 'node:assert/strict';
import type { OutgoingHttpHeaders } from 'node:http';
import { test } from 'node:test';
import { createTraceState, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { extract, inject, injectUnsampledW3c } from '../../../src/tracing/propagation.ts';

const T1 = '4bf92f3577b34da6a3ce929d0e0e4736';
const S1 = '00f067aa0ba902b7';
const T2 = '80f198ee56343ba864fe8b2a57d3eff7';
const S2 = 'e457b5a2e4d86bd1';

const w3c = { traceparent: `00-${T1}-${S1}-01`, tracestate: 'vendor=x' };
const b3single = { b3: `${T2}-${S2}-1` };
const b3multi = { 'x-b3-traceid': T2, 'x-b3-spanid': S2, 'x-b3-sampled': '1' };
const jaeger = { 'uber-trace-id': `${T2}:${S2}:0:1` };

const sc = (h: Record<string, string>) => trace.getSpanContext(extract(h).context);

test('each format alone is extracted', () => {
  assert.equal(sc(w3c)?.traceId, T1);
  assert.equal(sc(b3single)?.traceId, T2);
  assert.equal(sc(b3multi)?.spanId, S2);
  assert.equal(sc(jaeger)?.traceFlags, TraceFlags.SAMPLED);
  assert.deepEqual(extract(b3multi).present, ['b3-multi']);
});

test('W3C wins over B3 and Jaeger when a request carries several; all are reported present', () => {
  const got = extract({ ...jaeger, ...b3single, ...w3c });
  assert.equal(trace.getSpanContext(got.context)?.traceId, T1);
  assert.deepEqual(got.present, ['w3c', 'b3-single', 'jaeger']);
});

test('a malformed traceparent does not hide a valid B3 header', () => {
  assert.equal(sc({ traceparent: 'garbage', ...b3single })?.traceId, T2);
});

test('no headers: root context, nothing present', () => {
  const got = extract({});
  assert.equal(got.context, ROOT_CONTEXT);
  assert.deepEqual(got.present, []);
});

const child = trace.setSpanContext(ROOT_CONTEXT, {
  traceId: T1,
  spanId: 'b7ad6b7169203331',
  traceFlags: TraceFlags.SAMPLED,
});

test('injects into every present format, overwriting the stale values', () => {
  const headers: OutgoingHttpHeaders = { ...b3multi, 'x-b3-parentspanid': S1, ...jaeger, ...w3c };
  inject(child, ['w3c', 'b3-multi', 'jaeger'], headers);
  assert.equal(headers.traceparent, `00-${T1}-b7ad6b7169203331-01`);
  assert.equal(headers['x-b3-traceid'], T1);
  assert.equal(headers['x-b3-spanid'], 'b7ad6b7169203331');
  assert.equal(headers['x-b3-sampled'], '1');
  assert.equal(headers['x-b3-parentspanid'], undefined);
  assert.equal(headers['uber-trace-id'], `${T1}:b7ad6b7169203331:0:01`);
  assert.equal(headers.b3, undefined);
});

test('B3 single in, B3 single out', () => {
  const headers: OutgoingHttpHeaders = {};
  inject(child, extract(b3single).present, headers);
  assert.deepEqual(Object.keys(headers), ['b3']);
  assert.equal(headers.b3, `${T1}-b7ad6b7169203331-1`);
});

test('nothing present: W3C by default, or the configured fallback', () => {
  const a: OutgoingHttpHeaders = {};
  inject(child, [], a);
  assert.deepEqual(Object.keys(a), ['traceparent']);
  const b: OutgoingHttpHeaders = {};
  inject(child, [], b, ['jaeger']);
  assert.deepEqual(Object.keys(b), ['uber-trace-id']);
});

test('tracestate from the parent is carried on', () => {
  const parent = extract(w3c).context;
  const headers: OutgoingHttpHeaders = {};
  inject(parent, ['w3c'], headers);
  assert.equal(headers.tracestate, 'vendor=x');
});

test('the unsampled W3C shortcut writes exactly what the propagator writes, and only for W3C', () => {
  for (const traceState of [undefined, createTraceState('vendor=x,other=y')]) {
    const ctx = {
      traceId: T1,
      spanId: S1,
      traceFlags: TraceFlags.NONE,
      ...(traceState ? { traceState } : {}),
    };
    for (const present of [[], ['w3c']] as const) {
      const direct: OutgoingHttpHeaders = {};
      const viaPropagator: OutgoingHttpHeaders = {};
      assert.equal(injectUnsampledW3c(ctx, present, direct), true);
      inject(trace.setSpanContext(ROOT_CONTEXT, ctx), present, viaPropagator);
      assert.deepEqual(direct, viaPropagator);
    }
  }
  const untouched: OutgoingHttpHeaders = {};
  const ctx = { traceId: T1, spanId: S1, traceFlags: TraceFlags.NONE };
  assert.equal(injectUnsampledW3c(ctx, ['b3-single'], untouched), false);
  assert.equal(injectUnsampledW3c(ctx, ['w3c', 'jaeger'], untouched), false);
  assert.deepEqual(untouched, {});
});

test('a request without any trace header extracts the root context and no format', () => {
  const got = extract({ host: 'a', 'user-agent': 'x' });
  assert.equal(trace.getSpanContext(got.context), undefined);
  assert.deepEqual(got.present, []);
});
