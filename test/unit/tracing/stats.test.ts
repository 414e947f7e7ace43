import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { createTracing, type TracingOptions } from '../../../src/tracing/index.ts';
import type { HopStart } from '../../../src/tracing/hop.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

/** An exporter whose batches wait until the test answers them. */
class HeldExporter implements SpanExporter {
  readonly pending: { spans: ReadableSpan[]; done: (r: ExportResult) => void }[] = [];
  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    this.pending.push({ spans, done });
  }
  answer(code: ExportResultCode): number {
    let n = 0;
    for (const p of this.pending.splice(0)) {
      n += p.spans.length;
      p.done(code === ExportResultCode.SUCCESS ? { code } : { code, error: new Error('ECONNREFUSED') });
    }
    return n;
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function withExporter(
  exporter: SpanExporter,
  extra: Partial<TracingOptions> = {},
): ReturnType<typeof createTracing> {
  return createTracing({
    endpoint: undefined,
    exporter,
    sampling: 1,
    pod: {},
    logger: memoryLogger(),
    ...extra,
  });
}

const hop: HopStart = {
  direction: 'egress',
  method: 'GET',
  target: '/',
  authority: 'a:80',
  headers: {},
  protocol: 'http',
};

test('a refusing collector: spans counted as dropped, logged once per transition', async () => {
  const exporter = new HeldExporter();
  const logger = memoryLogger();
  const tracing = withExporter(exporter, { logger });
  for (let i = 0; i < 3; i++) tracing.observer.startHop(hop).end({ status: 200 });
  const flushed = tracing.flush();
  assert.equal(exporter.answer(ExportResultCode.FAILED), 3);
  await flushed;
  tracing.observer.startHop(hop).end({ status: 200 });
  const second = tracing.flush();
  exporter.answer(ExportResultCode.FAILED);
  await second;
  assert.deepEqual(tracing.stats(), { exported: 0, droppedQueueFull: 0, droppedExportFailed: 4, dropped: 4 });
  tracing.observer.startHop(hop).end({ status: 200 });
  const third = tracing.flush();
  exporter.answer(ExportResultCode.SUCCESS);
  await third;
  assert.equal(tracing.stats().exported, 1);
  const msgs = logger.lines.map((l) => l.msg);
  assert.deepEqual(
    msgs.filter((m) => String(m).startsWith('trace export')),
    ['trace export failing; spans are dropped until the collector answers', 'trace export recovered'],
  );
  await tracing.shutdown();
});

test('a stalled collector: the queue bound drops spans and counts them, requests are untouched', async () => {
  const exporter = new HeldExporter();
  const tracing = withExporter(exporter, {
    batch: { maxQueueSize: 4, maxExportBatchSize: 2, scheduledDelayMillis: 60_000 },
  });
  // Spans 1-2 fill a batch that goes to the (stalled) exporter; 3-6 fill the queue; 7-10 drop.
  for (let i = 0; i < 10; i++) tracing.observer.startHop(hop).end({ status: 200 });
  assert.equal(exporter.pending.length, 1);
  assert.equal(tracing.stats().droppedQueueFull, 4);
  exporter.answer(ExportResultCode.SUCCESS);
  const flushed = tracing.flush();
  await new Promise((r) => setImmediate(r));
  exporter.answer(ExportResultCode.SUCCESS);
  await flushed;
  assert.deepEqual(tracing.stats(), { exported: 6, droppedQueueFull: 4, droppedExportFailed: 0, dropped: 4 });
  await tracing.shutdown();
});

test('an exporter that throws counts as a failed export, never an exception in the request', async () => {
  const exporter: SpanExporter = {
    export: () => {
      throw new Error('boom');
    },
    shutdown: () => Promise.resolve(),
  };
  const tracing = withExporter(exporter);
  tracing.observer.startHop(hop).end({ status: 200 });
  await tracing.flush();
  assert.equal(tracing.stats().droppedExportFailed, 1);
  await tracing.shutdown();
});

test('shutdown flushes buffered spans', async () => {
  const exporter = new HeldExporter();
  const tracing = withExporter(exporter);
  tracing.observer.startHop(hop).end({ status: 200 });
  assert.equal(exporter.pending.length, 0, 'batched, not exported per span');
  const stopped = tracing.shutdown();
  await new Promise((r) => setImmediate(r));
  assert.equal(exporter.answer(ExportResultCode.SUCCESS), 1);
  await stopped;
  assert.equal(tracing.stats().exported, 1);
  assert.equal(tracing.shutdown(), stopped, 'idempotent');
});

test('shutdown does not wait for a collector that never answers', async () => {
  const clock = new FakeClock();
  const logger = memoryLogger();
  const exporter = new HeldExporter();
  const tracing = withExporter(exporter, {
    logger,
    clock,
    shutdownTimeoutMs: 3_000,
    batch: { exportTimeoutMillis: 60_000 },
  });
  tracing.observer.startHop(hop).end({ status: 200 });
  let done = false;
  const stopped = tracing.shutdown().then(() => (done = true));
  await clock.advance(2_999);
  assert.equal(done, false);
  await clock.advance(1);
  await stopped;
  assert.ok(logger.lines.some((l) => String(l.msg).includes('timed out')));
  exporter.answer(ExportResultCode.FAILED); // releases the processor's own export timer
});
