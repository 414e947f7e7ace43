import assert from 'node:assert/strict';
import type { OutgoingHttpHeaders } from 'node:http';
import { test } from 'node:test';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { createTracing, type Tracing } from '../../../src/tracing/index.ts';
import type { HopStart } from '../../../src/tracing/hop.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

function setup(sampling = 1, name = 'web'): { tracing: Tracing; exporter: InMemorySpanExporter } {
  const exporter = new InMemorySpanExporter();
  const tracing = createTracing({
    endpoint: undefined,
    exporter,
    sampling,
    pod: { name: `${name}-7d9f8b6c4d-x2x7q`, namespace: 'shop', nodeName: 'n1', labels: { app: name } },
    logger: memoryLogger(),
  });
  return { tracing, exporter };
}

const egress = (headers: HopStart['headers'] = {}): HopStart => ({
  direction: 'egress',
  method: 'GET',
  target: '/items/7?token=secret',
  authority: 'catalog.shop:8080',
  headers,
  peerAddress: '127.0.0.1',
  protocol: 'http',
});

async function finished(t: { tracing: Tracing; exporter: InMemorySpanExporter }): Promise<ReadableSpan[]> {
  await t.tracing.flush();
  return t.exporter.getFinishedSpans();
}

test('egress: one CLIENT span continuing the app context, with HTTP attributes and no query', async () => {
  const t = setup();
  const hop = t.tracing.observer.startHop(egress({ traceparent: `00-${TRACE}-${PARENT}-01` }));
  hop.setService('shop/catalog');
  hop.setEndpoint('10.1.2.3', 8080);
  hop.setStale(true);
  const upstream: OutgoingHttpHeaders = {};
  hop.inject(upstream);
  hop.end({ status: 200 });
  const [span, ...rest] = await finished(t);
  assert.equal(rest.length, 0);
  assert.ok(span);
  assert.equal(span.kind, SpanKind.CLIENT);
  assert.equal(span.name, 'GET');
  assert.equal(span.spanContext().traceId, TRACE);
  assert.equal(span.parentSpanContext?.spanId, PARENT);
  assert.deepEqual(span.attributes, {
    'outrigger.direction': 'egress',
    'server.address': 'catalog.shop',
    'server.port': 8080,
    'http.request.method': 'GET',
    'network.protocol.name': 'http',
    'url.scheme': 'http',
    'url.path': '/items/7',
    'url.full': 'http://catalog.shop:8080/items/7',
    'outrigger.service': 'shop/catalog',
    'network.peer.address': '10.1.2.3',
    'network.peer.port': 8080,
    'outrigger.endpoint': '10.1.2.3:8080',
    'outrigger.discovery.stale': true,
    'http.response.status_code': 200,
  });
  assert.equal(span.status.code, SpanStatusCode.UNSET);
  assert.equal(upstream.traceparent, `00-${TRACE}-${span.spanContext().spanId}-01`);
  assert.equal(span.resource.attributes['service.name'], 'web');
  assert.equal(span.resource.attributes['k8s.namespace.name'], 'shop');
  assert.equal(span.resource.attributes['k8s.pod.name'], 'web-7d9f8b6c4d-x2x7q');
  assert.equal(span.resource.attributes['k8s.node.name'], 'n1');
});

test('ingress: SERVER span child of the upstream CLIENT span, across two sidecars', async () => {
  const a = setup(1, 'web');
  const b = setup(1, 'catalog');
  const out = a.tracing.observer.startHop(egress());
  const wire: OutgoingHttpHeaders = {};
  out.inject(wire);
  const inHop = b.tracing.observer.startHop({
    ...egress(wire as HopStart['headers']),
    direction: 'ingress',
    peerAddress: '10.0.0.9',
  });
  const toApp: OutgoingHttpHeaders = {};
  inHop.inject(toApp);
  inHop.end({ status: 404 });
  out.end({ status: 404 });
  const [client] = await finished(a);
  const [server] = await finished(b);
  assert.ok(client && server);
  assert.equal(server.kind, SpanKind.SERVER);
  assert.equal(server.spanContext().traceId, client.spanContext().traceId);
  assert.equal(server.parentSpanContext?.spanId, client.spanContext().spanId);
  assert.equal(server.attributes['client.address'], '10.0.0.9');
  assert.equal(server.attributes['url.full'], undefined);
  assert.equal(toApp.traceparent, `00-${server.spanContext().traceId}-${server.spanContext().spanId}-01`);
  // A 404 is the server working; for the client it is an error (HTTP semantic conventions).
  assert.equal(server.status.code, SpanStatusCode.UNSET);
  assert.equal(client.status.code, SpanStatusCode.ERROR);
  assert.equal(client.attributes['error.type'], '404');
});

test("a meshed caller's SPIFFE id is an attribute of the server span only", async () => {
  const t = setup();
  const peer = { id: 'spiffe://cluster.local/ns/shop/sa/web', label: 'shop/web' };
  t.tracing.observer.startHop({ ...egress(), direction: 'ingress', peer }).end({ status: 200 });
  t.tracing.observer.startHop({ ...egress(), direction: 'ingress' }).end({ status: 200 });
  t.tracing.observer.startHop({ ...egress(), peer }).end({ status: 200 });
  const spans = await finished(t);
  assert.deepEqual(
    spans.map((s) => [s.kind, s.attributes['outrigger.peer.identity']]),
    [
      [SpanKind.SERVER, 'spiffe://cluster.local/ns/shop/sa/web'],
      [SpanKind.SERVER, undefined],
      [SpanKind.CLIENT, undefined],
    ],
  );
});

test('retries are events on the one span, with reason, attempt and endpoint', async () => {
  const t = setup();
  const hop = t.tracing.observer.startHop(egress());
  hop.setEndpoint('10.1.2.3', 8080);
  hop.addRetry('upstream_failed');
  hop.setEndpoint('fd00::5', 8080);
  hop.end({ status: 200 });
  const [span] = await finished(t);
  assert.ok(span);
  assert.deepEqual(
    span.events.map((e) => [e.name, e.attributes]),
    [
      [
        'retry',
        {
          'outrigger.retry.reason': 'upstream_failed',
          'outrigger.retry.attempt': 1,
          'outrigger.endpoint': '10.1.2.3:8080',
        },
      ],
    ],
  );
  assert.equal(span.attributes['outrigger.endpoint'], '[fd00::5]:8080');
  assert.equal(span.attributes['http.request.resend_count'], 1);
});

test('a proxy error code marks the span as failed with error.type', async () => {
  const t = setup();
  const hop = t.tracing.observer.startHop({ ...egress(), direction: 'ingress' });
  hop.end({ status: 503, errorCode: 'no_endpoints', errorMessage: 'no ready endpoints for shop/catalog' });
  hop.end({ status: 200 });
  const spans = await finished(t);
  assert.equal(spans.length, 1, 'end is idempotent');
  assert.equal(spans[0]?.attributes['error.type'], 'no_endpoints');
  assert.deepEqual(spans[0]?.status, {
    code: SpanStatusCode.ERROR,
    message: 'no ready endpoints for shop/catalog',
  });
});

test('unknown methods become _OTHER; TCP hops are named TCP without HTTP attributes', async () => {
  const t = setup();
  t.tracing.observer.startHop({ ...egress(), method: 'PROPFIND' }).end({ status: 207 });
  t.tracing.observer.startHop({ ...egress(), method: '', target: '', protocol: 'tcp' }).end({ status: 0 });
  const [http, tcp] = await finished(t);
  assert.equal(http?.name, '_OTHER');
  assert.equal(http?.attributes['http.request.method_original'], 'PROPFIND');
  assert.equal(tcp?.name, 'TCP');
  assert.equal(tcp?.attributes['network.transport'], 'tcp');
  assert.equal(tcp?.attributes['http.request.method'], undefined);
});

test('sampling 0: no span and the app headers pass through untouched', async () => {
  const t = setup(0);
  const incoming = { b3: `${TRACE}-${PARENT}-1` };
  const hop = t.tracing.observer.startHop(egress(incoming));
  const upstream: OutgoingHttpHeaders = { ...incoming };
  hop.inject(upstream);
  hop.end({ status: 200 });
  assert.deepEqual(upstream, incoming);
  assert.equal((await finished(t)).length, 0);
});

test('sampling is live: 0 -> 1 -> 0 without a new tracer', async () => {
  const t = setup(0);
  t.tracing.observer.startHop(egress()).end({ status: 200 });
  t.tracing.setSampling(1);
  assert.equal(t.tracing.sampling(), 1);
  t.tracing.observer.startHop(egress()).end({ status: 200 });
  t.tracing.setSampling(0);
  t.tracing.observer.startHop(egress()).end({ status: 200 });
  assert.equal((await finished(t)).length, 1);
});

test('parent-based: an unsampled parent is respected but its context still propagates', async () => {
  const t = setup(1);
  const hop = t.tracing.observer.startHop(egress({ traceparent: `00-${TRACE}-${PARENT}-00` }));
  const upstream: OutgoingHttpHeaders = {};
  hop.inject(upstream);
  hop.end({ status: 200 });
  assert.equal((await finished(t)).length, 0);
  assert.match(String(upstream.traceparent), new RegExp(`^00-${TRACE}-[0-9a-f]{16}-00$`));
  assert.notEqual(String(upstream.traceparent).split('-')[2], PARENT);
});

test('a sampled parent is followed even when the local ratio would not start a trace', async () => {
  const t = setup(0.000001);
  const hop = t.tracing.observer.startHop(egress({ 'uber-trace-id': `${TRACE}:${PARENT}:0:1` }));
  const upstream: OutgoingHttpHeaders = {};
  hop.inject(upstream);
  hop.end({ status: 200 });
  const [span] = await finished(t);
  assert.equal(span?.spanContext().traceId, TRACE);
  assert.equal(upstream['uber-trace-id'], `${TRACE}:${span?.spanContext().spanId}:0:01`);
  assert.equal(upstream.traceparent, undefined);
});

test('tracing without a collector is disabled: no-op observer, zero stats', async () => {
  const t = createTracing({ endpoint: undefined, sampling: 1, pod: {}, logger: memoryLogger() });
  assert.equal(t.enabled, false);
  const headers: OutgoingHttpHeaders = {};
  const hop = t.observer.startHop(egress());
  hop.inject(headers);
  hop.end({ status: 200 });
  assert.deepEqual(headers, {});
  assert.deepEqual(t.stats(), { exported: 0, droppedQueueFull: 0, droppedExportFailed: 0, dropped: 0 });
  await t.shutdown();
});

test('absolute-form targets (explicit capture) name the server, over the Host header', async () => {
  const t = setup();
  const hop = t.tracing.observer.startHop({
    ...egress(),
    target: 'http://[fd00::7]:8080/items/7?token=secret',
    authority: '127.0.0.1:7400',
  });
  hop.end({ status: 200 });
  const [span] = await finished(t);
  assert.equal(span?.attributes['server.address'], 'fd00::7');
  assert.equal(span?.attributes['server.port'], 8080);
  assert.equal(span?.attributes['url.path'], '/items/7');
  assert.equal(span?.attributes['url.full'], 'http://[fd00::7]:8080/items/7');
});

test('new traces: the ratio is applied once, on the trace id that is propagated', async () => {
  // A seeded generator makes the ids, hence the decisions, the same on every run.
  let seed = 42;
  const random = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const exporter = new InMemorySpanExporter();
  const t = {
    exporter,
    tracing: createTracing({
      endpoint: undefined,
      exporter,
      sampling: 0.5,
      pod: {},
      logger: memoryLogger(),
      random,
    }),
  };
  // TraceIdRatioBased: sampled iff the xor-fold of the id's four 32-bit words < ratio * (2^32 - 1).
  const fold = (id: string): number =>
    [0, 8, 16, 24].reduce((acc, i) => (acc ^ parseInt(id.slice(i, i + 8), 16)) >>> 0, 0);
  const bound = Math.floor(0.5 * 4294967295);
  const injected: string[] = [];
  for (let i = 0; i < 400; i++) {
    const hop = t.tracing.observer.startHop(egress());
    const headers: OutgoingHttpHeaders = {};
    hop.inject(headers);
    hop.end({ status: 200 });
    injected.push(String(headers.traceparent));
  }
  const exported = new Set((await finished(t)).map((s) => s.spanContext().traceId));
  let sampled = 0;
  for (const tp of injected) {
    const [, traceId = '', , flags] = tp.split('-');
    const wanted = fold(traceId) < bound;
    assert.equal(flags, wanted ? '01' : '00', tp);
    assert.equal(exported.has(traceId), wanted, tp);
    if (wanted) sampled++;
  }
  // Deciding twice (once here, once in the SDK on another id) would sample about a quarter.
  assert.ok(sampled > 160 && sampled < 240, `sampled ${sampled} of 400 at ratio 0.5`);
  assert.equal(exported.size, sampled);
});

test('a gRPC call: span named service/method with the RPC attributes and its gRPC status', async () => {
  const t = setup();
  const start: HopStart = {
    ...egress(),
    method: 'POST',
    target: '/shop.Catalog/GetItem',
    rpc: { service: 'shop.Catalog', method: 'GetItem' },
  };
  t.tracing.observer.startHop(start).end({ status: 200, grpcStatus: 0 });
  const server = t.tracing.observer.startHop({ ...start, direction: 'ingress' });
  server.end({ status: 200, grpcStatus: 5 });
  const client = t.tracing.observer.startHop(start);
  client.end({ status: 200, grpcStatus: 14 });
  const [ok, notFound, unavailable] = await finished(t);
  assert.equal(ok?.name, 'shop.Catalog/GetItem');
  assert.equal(ok?.attributes['rpc.system'], 'grpc');
  assert.equal(ok?.attributes['rpc.service'], 'shop.Catalog');
  assert.equal(ok?.attributes['rpc.method'], 'GetItem');
  assert.equal(ok?.attributes['rpc.grpc.status_code'], 0);
  assert.equal(ok?.status.code, SpanStatusCode.UNSET);
  // NOT_FOUND is the server working (a SERVER span stays unset); UNAVAILABLE fails a CLIENT span.
  assert.equal(notFound?.attributes['rpc.grpc.status_code'], 5);
  assert.equal(notFound?.status.code, SpanStatusCode.UNSET);
  assert.equal(unavailable?.status.code, SpanStatusCode.ERROR);
  assert.equal(unavailable?.attributes['error.type'], '14');
});
