import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IdleTrim } from '../../../src/runtime/idle-trim.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const MB = 1024 * 1024;

/** A process whose loop load and resident memory the test sets; a collection drops it to `floor`. */
function fakeProcess() {
  const p = { busy: 0, rss: 80 * MB, floor: 60 * MB, collections: 0 };
  const deps = {
    busy: () => p.busy,
    rss: () => p.rss,
    collect: () => {
      p.collections++;
      p.rss = p.floor;
    },
  };
  return { p, deps };
}

function started(options: ConstructorParameters<typeof IdleTrim>[1] = {}) {
  const clock = new FakeClock();
  const { p, deps } = fakeProcess();
  const trim = new IdleTrim(
    { clock, log: memoryLogger('info'), ...deps },
    {
      checkMs: 5_000,
      quietChecks: 2,
      quietBelow: 0.005,
      growthBytes: 4 * MB,
      ...options,
    },
  );
  trim.start();
  return { clock, p, trim };
}

describe('IdleTrim', () => {
  it('collects once the loop has been quiet for two checks after start-up, and not again while nothing grows', async () => {
    const { clock, p, trim } = started();
    await clock.advance(5_000);
    assert.equal(p.collections, 0, 'one quiet check is not enough');
    await clock.advance(5_000);
    assert.equal(p.collections, 1);
    assert.equal(trim.trims, 1);
    p.rss += 3 * MB; // less than the growth worth a trim
    await clock.advance(60_000);
    assert.equal(p.collections, 1);
  });

  it('never collects while the loop is busy, then collects when a burst has ended and memory grew', async () => {
    const { clock, p } = started();
    await clock.advance(10_000);
    assert.equal(p.collections, 1);
    p.busy = 0.4;
    p.rss = 120 * MB;
    await clock.advance(60_000);
    assert.equal(p.collections, 1, 'a busy loop is never paused for a trim');
    p.busy = 0.001;
    await clock.advance(5_000);
    assert.equal(p.collections, 1, 'one quiet check after the burst is not enough');
    await clock.advance(5_000);
    assert.equal(p.collections, 2);
    assert.equal(p.rss, p.floor);
  });

  it('a busy check in between restarts the count of quiet ones', async () => {
    const { clock, p } = started();
    await clock.advance(5_000);
    p.busy = 0.01;
    await clock.advance(5_000);
    p.busy = 0;
    await clock.advance(5_000);
    assert.equal(p.collections, 0);
    await clock.advance(5_000);
    assert.equal(p.collections, 1);
  });

  it('stops checking when stopped', async () => {
    const { clock, p, trim } = started();
    trim.stop();
    await clock.advance(60_000);
    assert.equal(p.collections, 0);
    assert.deepEqual(clock.pending(), []);
  });
});
