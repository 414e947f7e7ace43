import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Backoff } from '../../../src/shared/backoff.ts';
import { FakeClock } from '../../harness/fake-clock.ts';

test('full jitter stays within the doubling ceiling and the cap', () => {
  const b = new Backoff({ initialMs: 100, maxMs: 1_000, factor: 2 }, () => 0.999);
  assert.deepEqual(
    Array.from({ length: 6 }, () => b.next()),
    [99, 199, 399, 799, 999, 999],
  );
  b.reset();
  assert.equal(b.next(), 99);
});

test('jitter uses the injected randomness', () => {
  const b = new Backoff({ initialMs: 1_000, maxMs: 10_000, factor: 2 }, () => 0.25);
  assert.deepEqual([b.next(), b.next(), b.next()], [250, 500, 1_000]);
});

test('fake clock fires timers only when advanced, in order', async () => {
  const clock = new FakeClock(0);
  const fired: number[] = [];
  clock.setTimer(200, () => fired.push(200));
  clock.setTimer(100, () => fired.push(100));
  const cancelled = clock.setTimer(150, () => fired.push(150));
  cancelled.cancel();
  await clock.advance(99);
  assert.deepEqual(fired, []);
  await clock.advance(200);
  assert.deepEqual(fired, [100, 200]);
  assert.equal(clock.now(), 299);
});

test('sleep rejects when its signal aborts', async () => {
  const clock = new FakeClock(0);
  const ac = new AbortController();
  const p = clock.sleep(1_000, ac.signal);
  ac.abort(new Error('stop'));
  await assert.rejects(p, /stop/);
  assert.deepEqual(clock.pending(), []);
});
