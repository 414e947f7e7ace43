import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Metrics } from '../../../src/admin/metrics.ts';

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

test('request counts are exact across scrapes (counted between scrapes, added at scrape time)', async () => {
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

test('the bounded series cache drops entries without losing counts not yet scraped', async () => {
  const m = new Metrics({ defaultMetrics: false });
  m.request('egress', 'shop/api', '', 200, '', 0.001);
  // More distinct series than the cache keeps: it is emptied on the way.
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
