// CPU cost of the tracing observer per proxy hop (start, endpoint, stale, inject, end), in
// microseconds, for tracing disabled and sampling 0, 0.01 and 1.0. No network: spans go to an
// exporter that discards them, so this is the synchronous cost on the request path; the
// end-to-end figures (with OTLP export) come from tracing-overhead.ts.
//
//   node scripts/bench/tracing-hop-cost.ts [--hops 100000]
import { parseArgs } from 'node:util';
import type { OutgoingHttpHeaders } from 'node:http';
import { createTracing, disabledTracing, type Tracing } from '../../src/tracing/index.ts';
import { createLogger } from '../../src/shared/log.ts';
import type { HopStart } from '../../src/tracing/hop.ts';

const { values } = parseArgs({ options: { hops: { type: 'string', default: '100000' } } });
const hops = Math.min(2_000_000, Math.max(1_000, Number(values.hops)));
const rounds = 5;
const budgetMs = 60_000;

const discard = {
  export: (_s: unknown[], done: (r: { code: 0 }) => void) => done({ code: 0 }),
  shutdown: () => Promise.resolve(),
};
const make = (mode: string): Tracing =>
  mode === 'disabled'
    ? disabledTracing()
    : createTracing({
        endpoint: undefined,
        exporter: discard,
        sampling: Number(mode),
        pod: { name: 'bench-1', namespace: 'bench', labels: { app: 'bench' } },
        logger: createLogger({ level: 'error' }),
        batch: { maxQueueSize: 65_536, maxExportBatchSize: 4_096, scheduledDelayMillis: 50 },
      });

const info = (i: number): HopStart => ({
  direction: 'egress',
  method: 'GET',
  target: `/items/${i & 1023}?q=1`,
  authority: 'catalog.shop:8080',
  headers: { host: 'catalog.shop:8080', 'user-agent': 'bench', accept: '*/*' },
  peerAddress: '127.0.0.1',
  protocol: 'http',
});

async function run(t: Tracing): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < hops; i++) {
    const hop = t.observer.startHop(info(i));
    hop.setService('shop/catalog');
    hop.setEndpoint('10.1.2.3', 8080);
    hop.setStale(false);
    const headers: OutgoingHttpHeaders = { host: 'catalog.shop:8080' };
    hop.inject(headers);
    hop.end({ status: 200 });
    // Let the batch processor run between chunks, as it would between requests.
    if ((i & 4095) === 4095) await new Promise((r) => setImmediate(r));
  }
  return Number(process.hrtime.bigint() - start) / 1000 / hops;
}

const modes = ['disabled', '0', '0.01', '1'];
const results = new Map<string, number[]>(modes.map((m) => [m, []]));
const deadline = Date.now() + budgetMs;
for (let r = 0; r < rounds && Date.now() < deadline; r++) {
  for (const mode of modes) {
    const t = make(mode);
    results.get(mode)?.push(await run(t));
    await t.shutdown();
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
process.stdout.write(
  `${hops} hops per mode, median of ${results.get('1')?.length} rounds (Node ${process.version})\n`,
);
process.stdout.write('| tracing | µs per hop |\n|---|---|\n');
for (const mode of modes) {
  const label = mode === 'disabled' ? 'disabled' : `sampling ${mode}`;
  process.stdout.write(`| ${label} | ${median(results.get(mode) ?? []).toFixed(3)} |\n`);
}
