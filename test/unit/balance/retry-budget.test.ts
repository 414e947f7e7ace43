import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../../harness/fake-clock.ts';
import { RetryBudget } from '../../../src/balance/retry-budget.ts';

test('the budget allows the floor plus a ratio of recent requests', () => {
  const clock = new FakeClock();
  const budget = new RetryBudget(clock, { ratio: 0.2, minPerSecond: 1, ttlMs: 10_000 });
  for (let i = 0; i < 100; i++) budget.deposit();
  let granted = 0;
  while (budget.tryWithdraw() && granted < 1_000) granted++;
  assert.equal(granted, 30); // 1/s * 10 s + 0.2 * 100
});

test('spent budget recovers as the window slides', async () => {
  const clock = new FakeClock();
  const budget = new RetryBudget(clock, { ratio: 0, minPerSecond: 1, ttlMs: 2_000 });
  assert.equal(budget.tryWithdraw(), true);
  assert.equal(budget.tryWithdraw(), true);
  assert.equal(budget.tryWithdraw(), false);
  await clock.advance(2_000);
  assert.equal(budget.tryWithdraw(), true);
});
