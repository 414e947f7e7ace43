// The real data path (createDataPath: egress and ingress listeners over http-proxy, routing,
// balancing) with tracing, exporting to a real Jaeger: app -> egress of sidecar "web" ->
// ingress of sidecar "catalog" -> backend, for each propagation format. Discovery is the file
// source (loopback endpoints are fine there: no API server is involved).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { createDataPath, type DataPath } from '../../src/compose/data-path.ts';
import { loadConfig } from '../../src/config/load.ts';
import { createFileResolver, type FileResolver } from '../../src/discovery/file-source.ts';
import { systemClock } from '../../src/shared/clock.ts';
import { memoryLogger } from '../harness/memory-logger.ts';
import { createTracing, type Tracing } from '../../src/tracing/index.ts';
import type { Format } from '../../src/tracing/propagation.ts';
import { waitFor } from '../harness/discovery.ts';
import { startJaeger, type Jaeger, type JaegerSpan } from '../harness/jaeger.ts';
import { serviceYaml, startEchoBackend } from '../harness/tracing-relay.ts';

const APP_SPAN = '00f067aa0ba902b7';

function headersFor(format: Format, traceId: string): Record<string, string> {
  switch (format) {
    case 'w3c':
      return { traceparent: `00-${traceId}-${APP_SPAN}-01` };
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

interface Mesh {
  web: Tracing;
  catalog: Tracing;
  webProxy: DataPath;
  resolver: FileResolver;
  sourceFile: string;
  /** Sends one request as the app would through HTTP_PROXY (explicit capture). */
  get(pathname: string, headers?: Record<string, string>): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

async function mesh(jaeger: Jaeger, sampling: number): Promise<Mesh> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-tracing-'));
  const sourceFile = path.join(dir, 'services.yaml');
  const backend = await startEchoBackend();
  const mkTracing = (app: string, node: string): Tracing =>
    createTracing({
      endpoint: jaeger.otlpUrl,
      sampling,
      pod: { name: `${app}-7d9f8b6c4d-x2x7q`, namespace: 'shop', nodeName: node, labels: { app } },
      logger: memoryLogger('warn'),
      batch: { scheduledDelayMillis: 100, exportTimeoutMillis: 2_000 },
      shutdownTimeoutMs: 3_000,
    });
  const web = mkTracing('web', 'node-a');
  const catalog = mkTracing('catalog', 'node-b');
  const base = { ...loadConfig({}), capture: 'explicit', egressPort: 0, ingressPort: 0, adminPort: 0 };
  const hosts = { egress: '127.0.0.1', ingress: '127.0.0.1', admin: '127.0.0.1' };

  writeFileSync(sourceFile, '');
  const idle = createFileResolver({ path: sourceFile, clock: systemClock, logger: memoryLogger('error') });
  const catalogProxy = createDataPath(
    { ...base, appPorts: [backend.port] },
    { resolver: idle, namespace: 'shop', log: memoryLogger('error'), observer: catalog.observer, hosts },
  );
  await catalogProxy.start();
  writeFileSync(sourceFile, serviceYaml('catalog', 'shop', catalogProxy.ports().ingress, '10.96.0.77'));
  const resolver = createFileResolver({
    path: sourceFile,
    clock: systemClock,
    logger: memoryLogger('error'),
  });
  await resolver.reload();
  const webProxy = createDataPath(base, {
    resolver,
    namespace: 'shop',
    log: memoryLogger('error'),
    observer: web.observer,
    hosts,
  });
  await webProxy.start();
  const agent = new http.Agent({ keepAlive: true });
  return {
    web,
    catalog,
    webProxy,
    resolver,
    sourceFile,
    get: (pathname, headers = {}) =>
      new Promise((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port: webProxy.ports().egress,
            path: `http://catalog.shop${pathname}`,
            headers,
            agent,
          },
          (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => (body += d));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end();
      }),
    async close() {
      agent.destroy();
      await webProxy.close();
      await catalogProxy.close();
      await Promise.all([resolver.close(), idle.close(), backend.close()]);
      await Promise.all([web.shutdown(), catalog.shutdown()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function byService(spans: JaegerSpan[], service: string): JaegerSpan {
  const s = spans.find((x) => x.service === service);
  assert.ok(s, `no span of ${service} in ${JSON.stringify(spans)}`);
  return s;
}

test('app -> egress sidecar -> ingress sidecar -> backend: one trace per request, each format', async (t) => {
  const jaeger = await startJaeger(t);
  if (!jaeger) return;
  const m = await mesh(jaeger, 0.01);
  t.after(() => m.close());

  for (const format of ['w3c', 'b3-single', 'b3-multi', 'jaeger'] as const) {
    await t.test(format, async () => {
      const traceId = randomTraceId();
      const res = await m.get('/items/7?token=secret', headersFor(format, traceId));
      assert.equal(res.status, 200, res.body);
      const seenByBackend = JSON.parse(res.body) as Record<string, string>;
      await Promise.all([m.web.flush(), m.catalog.flush()]);
      const spans = await jaeger.waitForTrace(traceId, 2);
      assert.equal(spans.length, 2, `one span per sidecar: ${JSON.stringify(spans)}`);

      const client = byService(spans, 'web');
      const server = byService(spans, 'catalog');
      assert.equal(client.kind, 'client');
      assert.equal(server.kind, 'server');
      assert.equal(client.parentSpanId, APP_SPAN, 'egress continues the context the app sent');
      assert.equal(server.parentSpanId, client.spanId, 'ingress is the child of egress');
      assert.equal(client.name, 'GET');
      assert.equal(server.name, 'GET');
      assert.equal(client.tags['http.request.method'], 'GET');
      assert.equal(client.tags['http.response.status_code'], 200);
      assert.equal(server.tags['http.response.status_code'], 200);
      assert.equal(client.tags['url.path'], '/items/7');
      assert.equal(client.tags['server.address'], 'catalog.shop');
      assert.equal(client.tags['outrigger.service'], 'shop/catalog');
      // The proxy marks stale routes only; a fresh route carries no stale attribute.
      assert.notEqual(client.tags['outrigger.discovery.stale'], true);
      assert.match(String(client.tags['outrigger.endpoint']), /^127\.0\.0\.1:\d+$/);
      assert.ok(!JSON.stringify(spans).includes('secret'), 'the query string is not recorded');
      for (const [span, pod, node] of [
        [client, 'web-7d9f8b6c4d-x2x7q', 'node-a'],
        [server, 'catalog-7d9f8b6c4d-x2x7q', 'node-b'],
      ] as const) {
        assert.equal(span.resource['k8s.namespace.name'], 'shop');
        assert.equal(span.resource['k8s.pod.name'], pod);
        assert.equal(span.resource['k8s.node.name'], node);
      }
      // The backend sees the ingress span's context, in the app's format only.
      assert.deepEqual(Object.keys(seenByBackend).sort(), Object.keys(headersFor(format, traceId)).sort());
      assert.ok(Object.values(seenByBackend).join(' ').includes(server.spanId));
    });
  }

  await t.test('no incoming context: the egress starts a W3C trace when sampled', async () => {
    m.web.setSampling(1);
    const res = await m.get('/new');
    const seen = JSON.parse(res.body) as Record<string, string>;
    assert.deepEqual(Object.keys(seen), ['traceparent']);
    const traceId = String(seen.traceparent).split('-')[1] ?? '';
    await Promise.all([m.web.flush(), m.catalog.flush()]);
    const spans = await jaeger.waitForTrace(traceId, 2);
    assert.equal(byService(spans, 'web').parentSpanId, undefined, 'a root span');
    assert.equal(byService(spans, 'catalog').parentSpanId, byService(spans, 'web').spanId);
  });
});

test('a route served from stale discovery data is marked on the span', async (t) => {
  const jaeger = await startJaeger(t);
  if (!jaeger) return;
  const m = await mesh(jaeger, 1);
  t.after(() => m.close());
  // A broken source file: the file source keeps the last-known-good data and marks it stale.
  writeFileSync(m.sourceFile, 'kind: [unclosed');
  await m.resolver.reload().catch(() => undefined);
  const traceId = randomTraceId();
  const res = await m.get('/stale', headersFor('w3c', traceId));
  assert.equal(res.status, 200);
  await Promise.all([m.web.flush(), m.catalog.flush()]);
  const spans = await jaeger.waitForTrace(traceId, 2);
  assert.equal(byService(spans, 'web').tags['outrigger.discovery.stale'], true);
});

test('Jaeger stopped mid-traffic: zero failed requests, dropped spans counted, export resumes', async (t) => {
  const jaeger = await startJaeger(t);
  if (!jaeger) return;
  const m = await mesh(jaeger, 1);
  t.after(() => m.close());
  const statuses = new Map<number, number>();
  const send = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) {
      const code = await m.get(`/load/${i}`).then(
        (r) => r.status,
        () => 0,
      );
      statuses.set(code, (statuses.get(code) ?? 0) + 1);
    }
  };
  await send(50);
  await Promise.all([m.web.flush(), m.catalog.flush()]);
  assert.ok(m.web.stats().exported >= 50);

  await jaeger.stop();
  for (let round = 0; round < 6; round++) {
    await send(25);
    await new Promise((r) => setTimeout(r, 150));
  }
  assert.deepEqual([...statuses.entries()], [[200, 200]], 'every request during the outage succeeded');
  // The OTLP exporter retries a refused connection until its own timeout, and the batch
  // processor's flush gives up at the same moment, so a flush can return before the failed
  // batch is reported: wait for the exporter's verdict rather than for flush.
  const bothDropped = async (): Promise<boolean> => {
    await Promise.all([m.web.flush(), m.catalog.flush()]);
    return m.web.stats().dropped >= 150 && m.catalog.stats().dropped >= 150;
  };
  await waitFor('150 dropped spans per sidecar', bothDropped).catch((e: unknown) => {
    throw new Error(`${String(e)}: ${JSON.stringify([m.web.stats(), m.catalog.stats()])}`);
  });

  // Jaeger back: export resumes by itself.
  const exportedBefore = m.web.stats().exported;
  await jaeger.start();
  await send(20);
  await waitFor('export to resume', async () => {
    await m.web.flush();
    return m.web.stats().exported >= exportedBefore + 20;
  });
});
