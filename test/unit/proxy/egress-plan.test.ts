import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Balancers } from '../../../src/balance/balancer.ts';
import { FakeResolver } from '../../harness/fake-resolver.ts';
import { decide, type EgressPolicy } from '../../../src/proxy/egress-plan.ts';
import { AffinityTable } from '../../../src/routing/affinity.ts';
import { Router } from '../../../src/routing/router.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { ep, service } from '../routing/fixtures.ts';

test('every routed request counts toward its Service retry budget (20 % of requests on top of the floor)', async () => {
  const clock = new FakeClock();
  const resolver = new FakeResolver();
  resolver.set(service('prod', 'web', { eps: { http: [ep('10.0.0.1', 8080), ep('10.0.0.2', 8080)] } }));
  const policy: EgressPolicy = {
    router: new Router({ resolver, namespace: 'prod', clusterDomain: 'cluster.local', waitMs: 0 }),
    balancers: new Balancers({ algorithm: 'round-robin', clock, random: () => 0.5 }),
    affinity: new AffinityTable(clock),
    egressPolicy: 'allow-all',
    ownPorts: new Set(),
    retryStatuses: new Set(),
    maxAttempts: 3,
  };
  let budget: { tryWithdraw(): boolean } | undefined;
  for (let i = 0; i < 1_000; i++) {
    const d = await decide(policy, { host: 'web.prod', defaultPort: 80 }, undefined, '10.0.0.9');
    assert.equal(d.kind, 'plan');
    if (d.kind === 'plan') budget = d.budget;
  }
  let retries = 0;
  while (budget?.tryWithdraw() && retries < 10_000) retries++;
  // The floor is 10 per second over the 10 s window (100); 1,000 requests add 20 % (200).
  assert.equal(retries, 300);
});
