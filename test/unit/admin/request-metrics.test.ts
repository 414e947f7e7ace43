import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { Metrics } from '../../../src/admin/metrics.ts';
import { LatencyHistogram, RequestCounter } from '../../../src/admin/request-metrics.ts';

// The reference is prom-client's own rendering of the same observations: a scrape must not be
// able to tell the two apart.
const BOUNDS = [0.001, 0.01, 0.1, 1];
const OBSERVED: [string, string, string, number, string, number][] = [
  ['egress', 'ns/a', '', 200, '', 0.0005],
  ['egress', 'ns/"q\\', 'a\nb', 200, '', 0.004],
  ['egress', 'ns/a', '', 200, '', 0.001],
  ['egress', 'ns/a', '', 503, 'no_endpoints', 0.05],
  ['ingress', '', 'shop/web', 200, '', 2],
  ['ingress', '', 'unauthenticated', 200, '', 0.003],
  ['egress', 'ns/b', '', 200, '', 0.2],
  ['egress', 'ns/a', '', 200, '', 0.0099],
];

test('the request counter and latency histogram render exactly as prom-client renders them', async () => {
  const counter = new RequestCounter('t_requests_total', 'requests');
  const histogram = new LatencyHistogram('t_duration_seconds', 'latency \\ with\nescapes', BOUNDS);
  const ref = new Registry();
  const refCounter = new Counter({
    name: 't_requests_total',
    help: 'requests',
    labelNames: ['direction', 'service', 'caller', 'status', 'error'],
    registers: [ref],
  });
  const refHistogram = new Histogram({
    name: 't_duration_seconds',
    help: 'latency \\ with\nescapes',
    labelNames: ['direction', 'service', 'caller'],
    buckets: BOUNDS,
    registers: [ref],
  });
  for (const [direction, service, caller, status, error, seconds] of OBSERVED) {
    counter.inc(direction, service, caller, status, error);
    histogram.observe(direction, service, caller, seconds);
    refCounter.inc({ direction, service, caller, status: String(status), error });
    refHistogram.observe({ direction, service, caller }, seconds);
  }
  assert.equal(await counter.render(), await ref.getSingleMetricAsString('t_requests_total'));
  assert.equal(await histogram.render(), await ref.getSingleMetricAsString('t_duration_seconds'));
  assert.match(
    await histogram.render(),
    /t_duration_seconds_bucket\{le="0.01",direction="egress",service="ns\/a",caller=""\} 3/,
  );
  counter.reset();
  assert.doesNotMatch(await counter.render(), /ns\/a/);
});

test('a scrape of many series renders every one of them, in batches', async () => {
  const counter = new RequestCounter('t_requests_total', 'requests');
  for (let i = 0; i < 1_001; i++) counter.inc('egress', `ns/s${i}`, '', 200, '');
  const lines = (await counter.render()).split('\n');
  assert.equal(lines.length, 2 + 1_001);
  assert.equal(
    lines.at(-1),
    't_requests_total{direction="egress",service="ns/s1000",caller="",status="200",error=""} 1',
  );
});

test('the whole exposition keeps a blank line between metric blocks and ends in a newline', async () => {
  const m = new Metrics({ defaultMetrics: false });
  m.request('egress', 'shop/api', '', 200, '', 0.001);
  const text = await m.render();
  assert.ok(text.endsWith('} 1\n'), 'ends with the last sample and one newline');
  assert.match(text, /\n\n# HELP outrigger_requests_total /);
  assert.match(text, /\n\n# HELP outrigger_request_duration_seconds /);
  assert.doesNotMatch(text, /\n\n\n/);
});

/** Every outrigger_requests_total sample, and the histogram's count, as text lines. */
async function samples(m: Metrics, series: string): Promise<{ count: number; latency: number }> {
  const text = await m.render();
  const value = (prefix: string): number =>
    Number(
      text
        .split('\n')
        .find((l) => l.startsWith(prefix))
        ?.split(' ')[1] ?? 0,
    );
  return {
    count: value(`outrigger_requests_total{${series},status="200",error=""}`),
    latency: value(`outrigger_request_duration_seconds_count{${series}}`),
  };
}

test('request counts are exact across scrapes', async () => {
  const m = new Metrics({ defaultMetrics: false });
  const web = 'direction="ingress",service="",caller="shop/web"';
  for (let i = 0; i < 3; i++) m.request('ingress', '', 'shop/web', 200, '', 0.001);
  assert.deepEqual(await samples(m, web), { count: 3, latency: 3 });
  assert.deepEqual(await samples(m, web), { count: 3, latency: 3 }, 'a second scrape adds nothing');
  m.request('ingress', '', 'shop/web', 200, '', 0.001);
  m.request('ingress', '', 'unauthenticated', 200, '', 0.001);
  assert.deepEqual(await samples(m, web), { count: 4, latency: 4 });
  const plain = 'direction="ingress",service="",caller="unauthenticated"';
  assert.deepEqual(await samples(m, plain), { count: 1, latency: 1 });
});

test('ten thousand distinct series each keep an exact count', async () => {
  const m = new Metrics({ defaultMetrics: false });
  m.request('egress', 'shop/api', '', 200, '', 0.001);
  for (let i = 0; i < 10_002; i++) m.request('egress', `ns/s${i}`, '', 200, '', 0.001);
  m.request('egress', 'shop/api', '', 200, '', 0.001);
  assert.deepEqual(await samples(m, 'direction="egress",service="shop/api",caller=""'), {
    count: 2,
    latency: 2,
  });
  assert.deepEqual(await samples(m, 'direction="egress",service="ns/s9999",caller=""'), {
    count: 1,
    latency: 1,
  });
});
