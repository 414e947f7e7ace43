import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';
import { ThrottledLog } from '../../../src/shared/log-throttle.ts';

test('a recurring problem is logged once per window, with the count of what was folded', async () => {
  const clock = new FakeClock();
  const log = memoryLogger('warn');
  const t = new ThrottledLog(log, clock, 60_000);
  for (let i = 0; i < 5; i++) t.warn('no_endpoints/a', 'refused', { service: 'a' });
  t.warn('no_endpoints/b', 'refused', { service: 'b' });
  assert.deepEqual(
    log.lines.map((l) => [l.service, l.suppressed]),
    [
      ['a', undefined],
      ['b', undefined],
    ],
  );
  await clock.advance(60_000);
  t.warn('no_endpoints/a', 'refused', { service: 'a' });
  t.warn('no_endpoints/a', 'refused', { service: 'a' });
  assert.deepEqual(log.lines.at(-1), { ...log.lines.at(-1), service: 'a', suppressed: 4 });
  assert.equal(log.lines.length, 3);
});

test('the keys are bounded: the one seen longest ago is forgotten first', () => {
  const clock = new FakeClock();
  const log = memoryLogger('warn');
  const t = new ThrottledLog(log, clock, 60_000, 2);
  t.warn('a', 'x', {});
  t.warn('b', 'x', {});
  t.warn('c', 'x', {}); // forgets a
  t.warn('b', 'x', {}); // still throttled
  t.warn('a', 'x', {}); // logged again
  assert.equal(log.lines.length, 4);
});
