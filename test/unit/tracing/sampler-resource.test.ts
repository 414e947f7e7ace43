import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ROOT_CONTEXT, SpanKind, trace, TraceFlags } from '@opentelemetry/api';
import { SamplingDecision } from '@opentelemetry/sdk-trace';
import { LiveSampler } from '../../../src/tracing/sampler.ts';
import { podMetaFromEnv, serviceNameOf } from '../../../src/tracing/resource.ts';
import { podResource, tracesUrl } from '../../../src/tracing/sdk.ts';

// TraceIdRatioBased compares an xor-fold of the trace id's four 32-bit words with ratio * 2^32.
const LOW = '00000000000000000000000000000001';
const HIGH = 'ffffffff000000000000000000000000';

const decide = (s: LiveSampler, traceId: string, ctx = ROOT_CONTEXT): SamplingDecision =>
  s.shouldSample(ctx, traceId, 'GET', SpanKind.CLIENT, {}, []).decision;

test('ratio decides new traces; setRatio applies at once and is clamped', () => {
  const s = new LiveSampler(0.5);
  assert.equal(decide(s, LOW), SamplingDecision.RECORD_AND_SAMPLED);
  assert.equal(decide(s, HIGH), SamplingDecision.NOT_RECORD);
  s.setRatio(1);
  assert.equal(decide(s, HIGH), SamplingDecision.RECORD_AND_SAMPLED);
  s.setRatio(0);
  assert.equal(decide(s, LOW), SamplingDecision.NOT_RECORD);
  s.setRatio(7);
  assert.equal(s.ratio, 1);
  s.setRatio(Number.NaN);
  assert.equal(s.ratio, 0);
});

test('a remote parent decision wins over the ratio both ways', () => {
  const parent = (flags: TraceFlags) =>
    trace.setSpanContext(ROOT_CONTEXT, {
      traceId: HIGH,
      spanId: '00f067aa0ba902b7',
      traceFlags: flags,
      isRemote: true,
    });
  const s = new LiveSampler(0.0001);
  assert.equal(decide(s, HIGH, parent(TraceFlags.SAMPLED)), SamplingDecision.RECORD_AND_SAMPLED);
  s.setRatio(1);
  assert.equal(decide(s, LOW, parent(TraceFlags.NONE)), SamplingDecision.NOT_RECORD);
});

test('service name: explicit, then app.kubernetes.io/name, then app, then the workload', () => {
  const labels = { 'app.kubernetes.io/name': 'catalog', app: 'cat' };
  assert.equal(serviceNameOf({ serviceName: 'x', labels }), 'x');
  assert.equal(serviceNameOf({ labels }), 'catalog');
  assert.equal(serviceNameOf({ labels: { app: 'cat' } }), 'cat');
  assert.equal(serviceNameOf({ name: 'web-7d9f8b6c4d-x2x7q' }), 'web');
  assert.equal(serviceNameOf({ name: 'db-0' }), 'db-0');
  assert.equal(serviceNameOf({ name: 'job-x7k2p' }), 'job');
  assert.equal(serviceNameOf({ name: 'hello-world' }), 'hello-world');
  assert.equal(serviceNameOf({}), 'unknown_service:outrigger');
});

test('resource carries the downward-API attributes, and only those that are known', () => {
  const env = { OUTRIGGER_POD_NAME: 'web-1', OUTRIGGER_POD_NAMESPACE: 'shop', OUTRIGGER_NODE_NAME: '' };
  const meta = podMetaFromEnv(env);
  assert.deepEqual(meta, { name: 'web-1', namespace: 'shop', nodeName: undefined });
  assert.deepEqual(podResource({ ...meta, labels: { app: 'web' } }).attributes, {
    'service.name': 'web',
    'k8s.namespace.name': 'shop',
    'k8s.pod.name': 'web-1',
  });
});

test('collector URL: base gets /v1/traces, a full traces URL is kept', () => {
  assert.equal(
    tracesUrl('http://jaeger-collector.observability:4318/'),
    'http://jaeger-collector.observability:4318/v1/traces',
  );
  assert.equal(tracesUrl('http://c:4318'), 'http://c:4318/v1/traces');
  assert.equal(tracesUrl('https://c/otlp'), 'https://c/otlp/v1/traces');
  assert.equal(tracesUrl('http://c:4318/v1/traces'), 'http://c:4318/v1/traces');
});
