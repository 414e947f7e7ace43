// A collector that is slow, refusing or failing costs spans, never requests: requests through a
// traced hop all succeed while the collector misbehaves, and the lost spans are counted.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { test } from 'node:test';
import { createTracing, type Tracing } from '../../src/tracing/index.ts';
import { memoryLogger } from '../harness/memory-logger.ts';
import { freePort } from '../harness/jaeger.ts';
import { startEchoBackend, startRelay } from '../harness/tracing-relay.ts';

type Behaviour = 'stall' | 'refuse' | '503';

/** A collector that never answers, or always answers 503; 'refuse' is a port nobody listens on. */
async function badCollector(
  kind: Behaviour,
): Promise<{ url: string; hits: () => number; close(): Promise<void> }> {
  if (kind === 'refuse') {
    const port = await freePort();
    return { url: `http://127.0.0.1:${port}`, hits: () => 0, close: () => Promise.resolve() };
  }
  let hits = 0;
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    hits++;
    req.resume();
    if (kind === '503') res.writeHead(503, { 'retry-after': '0' }).end();
    // 'stall': read the request and never answer.
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits: () => hits,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

for (const kind of ['stall', 'refuse', '503'] as const) {
  test(`collector ${kind}: every request succeeds, spans are dropped and counted`, async (t) => {
    const collector = await badCollector(kind);
    const logger = memoryLogger('warn');
    const tracing: Tracing = createTracing({
      endpoint: collector.url,
      sampling: 1,
      pod: { labels: { app: 'web' } },
      logger,
      batch: { maxQueueSize: 64, maxExportBatchSize: 16, scheduledDelayMillis: 50, exportTimeoutMillis: 500 },
      shutdownTimeoutMs: 1_000,
    });
    const backend = await startEchoBackend();
    const relay = await startRelay({
      observer: tracing.observer,
      direction: 'egress',
      upstreamPort: backend.port,
    });
    t.after(async () => {
      await relay.close();
      await backend.close();
      await tracing.shutdown();
      await collector.close();
    });

    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    t.after(() => agent.destroy());
    const get = (i: number): Promise<number> =>
      new Promise((resolve) => {
        const req = http.get({ host: '127.0.0.1', port: relay.port, path: `/r/${i}`, agent }, (res) => {
          res.resume();
          res.once('end', () => resolve(res.statusCode ?? 0));
        });
        req.once('error', () => resolve(0));
      });
    const statuses: number[] = [];
    for (let batch = 0; batch < 10; batch++) {
      statuses.push(...(await Promise.all(Array.from({ length: 30 }, (_, i) => get(batch * 30 + i)))));
    }
    assert.deepEqual(
      statuses.filter((s) => s !== 200),
      [],
      'no request failed',
    );

    // Let every export attempt settle (each is bounded by the 500 ms export timeout).
    const deadline = Date.now() + 15_000;
    while (tracing.stats().dropped < 300 && Date.now() < deadline) {
      await tracing.flush();
      await new Promise((r) => setTimeout(r, 100));
    }
    const s = tracing.stats();
    assert.equal(s.exported, 0);
    assert.equal(s.dropped, 300, `all 300 spans are accounted as dropped: ${JSON.stringify(s)}`);
    if (kind === 'stall') assert.ok(s.droppedQueueFull > 0, 'a stalled collector fills the queue');
    if (kind !== 'refuse') assert.ok(collector.hits() > 0, 'the exporter did reach the collector');
    const warnings = logger.lines.filter((l) => String(l.msg).startsWith('trace export failing'));
    assert.equal(warnings.length, 1, 'one log line per transition, not per batch');
  });
}
