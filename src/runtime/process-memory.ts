import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { systemClock } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import { IdleTrim } from './idle-trim.ts';

type Gc = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * V8's collector as a function, taken from a fresh context so that the process's own global stays
 * without `gc`, and so that it works however node was started (no --expose-gc on a command line an
 * operator may override).
 */
function lastResortGc(): () => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as Gc;
  return () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

function loopUtilisation(): () => number {
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const since = performance.eventLoopUtilization(now, last);
    last = now;
    return since.utilization;
  };
}

/** The process's idle trim on the real clock, loop and collector (not started). */
export function processIdleTrim(log: Logger): IdleTrim {
  return new IdleTrim({
    clock: systemClock,
    busy: loopUtilisation(),
    rss: () => process.memoryUsage.rss(),
    collect: lastResortGc(),
    log,
  });
}

/** The trims so far, for /metrics. */
export const idleTrimMetrics = (trim: IdleTrim): Record<string, { help: string; value: number }> => ({
  outrigger_idle_trims: {
    help: 'Memory-reducing garbage collections run after a quiet period (resident memory had grown)',
    value: trim.trims,
  },
});
