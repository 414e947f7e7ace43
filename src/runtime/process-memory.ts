import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { systemClock } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import { HeapStep } from './heap-step.ts';
import { IdleTrim } from './idle-trim.ts';

type Gc = (options: { type: 'major'; execution: 'sync'; flavor?: 'last-resort' }) => void;

/**
 * V8's collector as a function, taken from a fresh context so that the process's own global stays
 * without `gc`, and so that it works however node was started (no --expose-gc on a command line an
 * operator may override).
 */
let gcFunction: Gc | undefined;

/** One for the process: each fresh context stays alive as long as its `gc` does. */
function v8Gc(): Gc {
  if (!gcFunction) {
    setFlagsFromString('--expose-gc');
    gcFunction = runInNewContext('gc') as Gc;
  }
  return gcFunction;
}

const YOUNG_SPACES = new Set(['new_space', 'new_large_object_space']);

function oldGenerationUsed(): number {
  let used = 0;
  for (const s of getHeapSpaceStatistics()) if (!YOUNG_SPACES.has(s.space_name)) used += s.space_used_size;
  return used;
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
  const gc = v8Gc();
  return new IdleTrim({
    clock: systemClock,
    busy: loopUtilisation(),
    rss: () => process.memoryUsage.rss(),
    collect: () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' }),
    log,
  });
}

/** The process's heap step on the real clock and collector (not started). */
export function processHeapStep(stepBytes: number): HeapStep {
  const gc = v8Gc();
  return new HeapStep(
    { clock: systemClock, oldGenerationUsed, collect: () => gc({ type: 'major', execution: 'sync' }) },
    { stepBytes, checkMs: 100 },
  );
}

/** The trims and heap-step collections so far, for /metrics. */
export const memoryMetrics = (
  trim: IdleTrim,
  step?: HeapStep,
): Record<string, { help: string; value: number }> => ({
  outrigger_idle_trims: {
    help: 'Memory-reducing garbage collections run after a quiet period (resident memory had grown)',
    value: trim.trims,
  },
  ...(step && {
    outrigger_heap_step_collections: {
      help: 'Full garbage collections run because the old generation had grown by the heap step',
      value: step.collections,
    },
  }),
});
