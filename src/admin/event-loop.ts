import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';

/**
 * The event loop's delay (how late a 10 ms timer fires) since the previous scrape, as quantiles:
 * every request a stall overlaps waits for it, so this is the proxy's own share of tail latency
 * (GC pauses, span export encoding, snapshot writes). A stall shorter than the 10 ms sampling
 * interval is seen in proportion to its length; a finer interval costs ~2 % of a core while idle.
 */
const RESOLUTION_MS = 10;

export function registerEventLoopDelay(registry: Registry): void {
  const h = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  h.enable();
  new Gauge({
    name: 'outrigger_event_loop_delay_seconds',
    help: `Event-loop delay since the previous scrape (timer sampled every ${RESOLUTION_MS} ms); quantile 1 is the maximum`,
    labelNames: ['quantile'],
    registers: [registry],
    collect() {
      const seen = h.count > 0;
      this.set({ quantile: '0.5' }, seen ? h.percentile(50) / 1e9 : 0);
      this.set({ quantile: '0.99' }, seen ? h.percentile(99) / 1e9 : 0);
      this.set({ quantile: '1' }, seen ? h.max / 1e9 : 0);
      h.reset();
    },
  });
}
