// Tracing exported to a real Jaeger (built by scripts/test-cluster) through two hops driven by the
// tracing observer: egress (app side) -> ingress (backend side) -> backend. The same assertions
// run for each propagation format the app may speak.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTracing, type Tracing } from '../../src/tracing/index.ts';
import type { Format } from '../../src/tracing/propagation.ts';
import { memoryLogger } from '../../src/shared/log.ts';
import { startJaeger, type Jaeger, type JaegerSpan } from '../harness/jaeger.ts';
import { startEchoBackend, startRelay, type Relay } from '../harness/tracing-relay.ts';

const APP_SPAN = '00f067aa0ba902b7';

function headersFor(format: Format, traceId: string): Record<string, string> {
  switch (format) {
    case 'w3c':
      return { traceparent: `00-${traceId}-${APP_SPAN}-01`, tracestate: 'app=1' };
    case 'b3-single':
      return { b3: `${traceId}-${APP_SPAN}-1` };
    case 'b3-multi':
      return { 'x-b3-traceid': traceId, 'x-b3-spanid': APP_SPAN, 'x-b3-sampled': '1' };
    case 'jaeger':
      return { 'uber-trace-id': `${traceId}:${APP_SPAN}:0:1` };
  }
}

const randomTraceId = (): string =>
  Array.from({ length: 32 }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');

interface Chain {
  web: Tracing;
  catalog: Tracing;
  url: string;
  close(): Promise<void>;
}

async function chain(jaeger: Jaeger, sampling: number, opts: { stale?: boolean } = {}): Promise<Chain> {
  const mk = (app: string, node: string): Tracing =>
    createTracing({
      endpoint: jaeger.otlpUrl,
      sampling,
      pod: { name: `${app}-7d9f8b6c4d-x2x7q`, namespace: 'shop', nodeName: node, labels: { app } },
      logger: memoryLogger('warn'),
      batch: { scheduledDelayMillis: 100, exportTimeoutMillis: 2_000 },
      shutdownTimeoutMs: 3_000,
    });
  const web = mk('web', 'node-a');
  const catalog = mk('catalog', 'node-b');
  const backend = await startEchoBackend();
  const ingress = await startRelay({
    observer: catalog.observer,
    direction: 'ingress',
    upstreamPort: backend.port,
  });
  const egress = await startRelay({
    observer: web.observer,
    direction: 'egress',
    upstreamPort: ingress.port,
    stale: opts.stale,
  });
  const relays: Relay[] = [egress, ingress, backend];
  return {
    web,
    catalog,
    url: `http://127.0.0.1:${egress.port}`,
    async close() {
      for (const r of relays) await r.close();
      await Promise.all([web.shutdown(), catalog.shutdown()]);
    },
  };
}

function byService(spans: JaegerSpan[], service: string): JaegerSpan {
  const s = spans.find((x) => x.service === service);
  assert.ok(s, `no span of ${service} in ${JSON.stringify(spans)}`);
  return s;
}

test('one trace in Jaeger per request, for each propagation format', async (t) => {
  const jaeger = await startJaeger(t);
  if (!jaeger) return;
  const c = await chain(jaeger, 0.01);
  t.after(() => c.close());

  for (const format of ['w3c', 'b3-single', 'b3-multi', 'jaeger'] as const) {
    await t.test(format, async () => {
      const traceId = randomTraceId();
      const res = await fetch(`${c.url}/items/7?secret=x`, { headers: headersFor(format, traceId) });
      assert.equal(res.status, 200);
      const seenByBackend = (await res.json()) as Record<string, string>;
      await Promise.all([c.web.flush(), c.catalog.flush()]);
      const spans = await jaeger.waitForTrace(traceId, 2);
      assert.equal(spans.length, 2, 'one span per sidecar');

      const client = byService(spans, 'web');
      const server = byService(spans, 'catalog');
      assert.equal(client.kind, 'client');
      assert.equal(server.kind, 'server');
      assert.equal(client.parentSpanId, APP_SPAN, 'egress continues the context the app sent');
      assert.equal(server.parentSpanId, client.spanId, 'ingress is the child of egress');
      assert.equal(client.name, 'GET');
      assert.equal(client.tags['http.request.method'], 'GET');
      assert.equal(client.tags['http.response.status_code'], 200);
      assert.equal(client.tags['url.path'], '/items/7');
      assert.equal(client.tags['url.full'], `${c.url}/items/7`);
      assert.equal(client.tags['outrigger.discovery.stale'], false);
      assert.match(String(client.tags['outrigger.endpoint']), /^127\.0\.0\.1:\d+$/);
      assert.equal(server.tags['client.address'], '127.0.0.1');
      for (const [span, pod, node] of [
        [client, 'web-7d9f8b6c4d-x2x7q', 'node-a'],
        [server, 'catalog-7d9f8b6c4d-x2x7q', 'node-b'],
      ] as const) {
        assert.equal(span.resource['k8s.namespace.name'], 'shop');
        assert.equal(span.resource['k8s.pod.name'], pod);
        assert.equal(span.resource['k8s.node.name'], node);
      }

      // The backend got the server span's context, in the app's format and only that one.
      const expected = headersFor(format, traceId);
      assert.deepEqual(Object.keys(seenByBackend).sort(), Object.keys(expected).sort());
      const carried = Object.values(seenByBackend).join(' ');
      assert.ok(carried.includes(server.spanId), `${carried} names ${server.spanId}`);
    });
  }

  await t.test('no incoming context: the egress starts a W3C trace when sampled', async () => {
    c.web.setSampling(1);
    const res = await fetch(`${c.url}/new`);
    const seen = (await res.json()) as Record<string, string>;
    assert.deepEqual(Object.keys(seen), ['traceparent']);
    const traceId = String(seen.traceparent).split('-')[1] ?? '';
    await Promise.all([c.web.flush(), c.catalog.flush()]);
    const spans = await jaeger.waitForTrace(traceId, 2);
    assert.equal(byService(spans, 'web').parentSpanId, undefined, 'a root span');
  });
});

test('stale routes are marked on the span', async (t) => {
  const jaeger = await startJaeger(t);
  if (!jaeger) return;
  const c = await chain(jaeger, 1, { stale: true });
  t.after(() => c.close());
  const traceId = randomTraceId();
  await (await fetch(`${c.url}/`, { headers: headersFor('w3c', traceId) })).arrayBuffer();
  await Promise.all([c.web.flush(), c.catalog.flush()]);
  const spans = await jaeger.waitForTrace(traceId, 2);
  assert.equal(byService(spans, 'web').tags['outrigger.discovery.stale'], true);
});

test('Jaeger stopped mid-traffic: zero failed requests, dropped spans counted, export recovers', async (t) => {
  const jaeger = await startJaeger(t);
  if (!jaeger) return;
  const c = await chain(jaeger, 1);
  t.after(() => c.close());

  const statuses = new Map<number, number>();
  const send = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) {
      const res = await fetch(`${c.url}/load/${i}`).catch(() => undefined);
      const code = res?.status ?? 0;
      await res?.arrayBuffer();
      statuses.set(code, (statuses.get(code) ?? 0) + 1);
    }
  };
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  await send(100);
  await Promise.all([c.web.flush(), c.catalog.flush()]);
  const before = c.web.stats();
  assert.ok(before.exported >= 100, `exported before the stop: ${JSON.stringify(before)}`);
  assert.equal(before.dropped, 0);

  await jaeger.stop();
  for (let round = 0; round < 10; round++) {
    await send(30);
    await pause(150); // lets the batch processor try (and fail) to export
  }
  await Promise.all([c.web.flush(), c.catalog.flush()]);
  const during = c.web.stats();
  assert.deepEqual([...statuses.entries()], [[200, 400]], 'every request succeeded');
  assert.ok(during.dropped >= 300, `spans of the outage are counted as dropped: ${JSON.stringify(during)}`);
  assert.ok(c.catalog.stats().dropped >= 300);

  await jaeger.start();
  await send(20);
  await Promise.all([c.web.flush(), c.catalog.flush()]);
  const after = c.web.stats();
  assert.ok(after.exported >= before.exported + 20, `export resumes: ${JSON.stringify(after)}`);
});
