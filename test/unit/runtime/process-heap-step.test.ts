// The heap step on this process's real V8 heap: it reads the old generation's use and its
// collection frees what is no longer reachable.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { processHeapStep } from '../../../src/runtime/process-memory.ts';

const MB = 1024 * 1024;
const oldSpaceUsed = (): number =>
  getHeapSpaceStatistics().find((s) => s.space_name === 'old_space')!.space_used_size;

test('grown past its step by garbage the scavenger promoted, the old generation is collected', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (o: { type: 'minor' | 'major'; execution: 'sync' }) => void;
  gc({ type: 'major', execution: 'sync' });
  const before = oldSpaceUsed();
  const step = processHeapStep(MB);
  step.start();
  try {
    let garbage: string[] | undefined = Array.from({ length: 8_000 }, (_, i) => `${i}`.padEnd(1_000, 'x'));
    // Two scavenges move the still-reachable strings into the old generation, then they die there.
    gc({ type: 'minor', execution: 'sync' });
    gc({ type: 'minor', execution: 'sync' });
    const grown = oldSpaceUsed();
    assert.ok(grown > before + 2 * MB, `old space ${before} before the garbage, ${grown} with it`);
    assert.ok(garbage.length > 0);
    garbage = undefined;
    for (let i = 0; i < 50 && step.collections === 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(step.collections >= 1, 'no collection within 5 s');
    assert.ok(
      oldSpaceUsed() < before + MB,
      `old space ${before} before the garbage, ${oldSpaceUsed()} after`,
    );
  } finally {
    step.stop();
  }
});
