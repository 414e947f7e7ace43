import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../../harness/fake-clock.ts';
import { AffinityTable } from '../../../src/routing/affinity.ts';

test('ClientIP affinity sticks until the idle timeout, refreshed by use', async () => {
  const clock = new FakeClock();
  const t = new AffinityTable(clock);
  t.bind('prod/web', '10.1.1.1', 'a');
  await clock.advance(9_000);
  assert.equal(
    t.lookup('prod/web', '10.1.1.1', 10, () => true),
    'a',
  );
  await clock.advance(9_000);
  assert.equal(
    t.lookup('prod/web', '10.1.1.1', 10, () => true),
    'a',
  );
  await clock.advance(10_001);
  assert.equal(
    t.lookup('prod/web', '10.1.1.1', 10, () => true),
    undefined,
  );
});

test('a binding to an unusable endpoint is dropped', () => {
  const t = new AffinityTable(new FakeClock());
  t.bind('prod/web', 'c', 'a');
  assert.equal(
    t.lookup('prod/web', 'c', 10, (id) => id !== 'a'),
    undefined,
  );
  assert.equal(
    t.lookup('prod/web', 'c', 10, () => true),
    undefined,
  );
  assert.equal(
    t.lookup('prod/web', 'other', 10, () => true),
    undefined,
  );
});
