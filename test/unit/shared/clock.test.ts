import assert from 'node:assert/strict';
import { test } from 'node:test';
import { everyOn, type Timer } from '../../../src/shared/clock.ts';
import { FakeClock } from '../../harness/fake-clock.ts';

test('everyOn repeats until cancelled, also when the callback cancels it', async () => {
  const clock = new FakeClock();
  let runs = 0;
  const timer = everyOn(clock, 100, () => runs++);
  await clock.advance(350);
  assert.equal(runs, 3);
  timer.cancel();
  await clock.advance(1_000);
  assert.equal(runs, 3);

  let inner = 0;
  const self: Timer = everyOn(clock, 100, () => {
    if (++inner === 2) self.cancel();
  });
  await clock.advance(1_000);
  assert.equal(inner, 2);
});
