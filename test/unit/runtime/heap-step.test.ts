import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HeapStep } from '../../../src/runtime/heap-step.ts';
import { FakeClock } from '../../harness/fake-clock.ts';

const MB = 1024 * 1024;

/** An old generation whose use the test sets; a full collection drops it to what is alive. */
function started(stepBytes = 4 * MB) {
  const clock = new FakeClock();
  const heap = { used: 20 * MB, alive: 12 * MB, collections: 0 };
  const step = new HeapStep(
    {
      clock,
      oldGenerationUsed: () => heap.used,
      collect: () => {
        heap.collections++;
        heap.used = heap.alive;
      },
    },
    { stepBytes, checkMs: 100 },
  );
  step.start();
  return { clock, heap, step };
}

describe('HeapStep', () => {
  it('collects once the old generation has grown by the step since start, then measures from what survived', async () => {
    const { clock, heap, step } = started();
    heap.used += 3.9 * MB;
    await clock.advance(1_000);
    assert.equal(heap.collections, 0, 'less than the step');
    heap.used += 0.1 * MB;
    await clock.advance(100);
    assert.equal(heap.collections, 1);
    assert.equal(step.collections, 1);
    heap.used = heap.alive + 3 * MB;
    await clock.advance(1_000);
    assert.equal(heap.collections, 1, 'the step counts from the 12 MB left, not from the 20 at start');
    heap.used = heap.alive + 4 * MB;
    await clock.advance(100);
    assert.equal(heap.collections, 2);
  });

  it("takes V8's own collection as the new floor", async () => {
    const { clock, heap } = started();
    heap.used = 10 * MB; // V8 collected between two checks
    await clock.advance(100);
    heap.used = 13.5 * MB;
    await clock.advance(1_000);
    assert.equal(heap.collections, 0, '3.5 MB above the floor V8 left');
    heap.used = 14 * MB;
    await clock.advance(100);
    assert.equal(heap.collections, 1);
  });

  it('reads nothing once stopped', async () => {
    const { clock, heap, step } = started();
    step.stop();
    heap.used += 100 * MB;
    await clock.advance(10_000);
    assert.equal(heap.collections, 0);
  });
});
