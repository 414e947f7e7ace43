import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { LatencyHistogram, RequestCounter } from '../../../src/admin/request-metrics.ts';

// The reference is prom-client's own rendering of the same observations: a scrape must not be
// able to tell the two apart.
const BOUNDS = [0.001, 0.01, 0.1, 1];
const OBSERVED: [string, string, number, string, number][] = [
  ['egress', 'ns/a', 200, '', 0.0005],
  ['egress', 'ns/a', 200, '', 0.001],
  ['egress', 'ns/a', 503, 'no_endpoints', 0.05],
  ['ingress', '', 200, '', 2],
  ['egress', 'ns/b', 200, '', 0.2],
  ['egress', 'ns/a', 200, '', 0.0099],
];

test('the request counter and latency histogram render exactly as prom-client renders them', async () => {
  const ours = new Registry();
  const counter = new RequestCounter('t_requests_total', 'requests', ours);
  const histogram = new LatencyHistogram('t_duration_seconds', 'latency', BOUNDS, ours);
  const ref = new Registry();
  const refCounter = new Counter({
    name: 't_requests_total',
    help: 'requests',
    labelNames: ['direction', 'service', 'status', 'error'],
    registers: [ref],
  });
  const refHistogram = new Histogram({
    name: 't_duration_seconds',
    help: 'latency',
    labelNames: ['direction', 'service'],
    buckets: BOUNDS,
    registers: [ref],
  });
  for (const [direction, service, status, error, seconds] of OBSERVED) {
    counter.inc(direction, service, status, error);
    histogram.observe(direction, service, seconds);
    refCounter.inc({ direction, service, status: String(status), error });
    refHistogram.observe({ direction, service }, seconds);
  }
  const rendered = await ours.metrics();
  assert.equal(rendered, await ref.metrics());
  assert.match(rendered, /t_duration_seconds_bucket\{le="0.01",direction="egress",service="ns\/a"\} 3/);
  assert.match(
    rendered,
    /t_requests_total\{direction="egress",service="ns\/a",status="503",error="no_endpoints"\} 1/,
  );
  ours.resetMetrics();
  assert.doesNotMatch(await ours.metrics(), /ns\/a/);
});
