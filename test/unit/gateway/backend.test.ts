import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Balancers } from '../../../src/balance/balancer.ts';
import { planBackend, type BackendPolicy } from '../../../src/gateway/backend.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { FakeResolver } from '../../harness/fake-resolver.ts';
import { ep, service } from '../routing/fixtures.ts';

test('a busy gateway may retry 20 % of its requests on top of the retry floor', async () => {
  const clock = new FakeClock();
  const resolver = new FakeResolver();
  resolver.set(service('shop', 'web', { eps: { http: [ep('10.0.0.1', 8080), ep('10.0.0.2', 8080)] } }));
  const policy: BackendPolicy = {
    resolver,
    balancers: new Balancers({ algorithm: 'round-robin', clock, random: () => 0.5 }),
    retryStatuses: new Set([503]),
    maxAttempts: 3,
    waitMs: 0,
  };
  const backend = { namespace: 'shop', name: 'web', port: { number: 80 } };
  let retries = 0;
  // 1,000 requests in 5 s whose first attempt fails, each asking for one retry as the forwarder does.
  for (let i = 0; i < 1_000; i++) {
    const plan = await planBackend(policy, backend);
    assert.equal(plan.kind, 'plan');
    if (plan.kind !== 'plan') return;
    const first = plan.next(new Set());
    assert.ok(first);
    plan.start(first)('server_error');
    const tried = new Set([first.id]);
    if (plan.canTry(tried) && plan.budget?.tryWithdraw()) {
      retries++;
      const second = plan.next(tried);
      assert.ok(second);
      plan.start(second)('success');
    }
    await clock.advance(5);
  }
  // The floor is 10 retries per second over the 10 s window (100); 1,000 requests add 20 % (200).
  assert.equal(retries, 300);
});
