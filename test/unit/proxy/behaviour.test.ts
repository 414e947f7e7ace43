import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyLiveOptions } from '../../../src/compose/live-options.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';
import { ep, service } from '../routing/fixtures.ts';
import { closedPort, metric, send, startBackend, startProxy } from './harness.ts';

test('an endpoint that keeps refusing is ejected (counted) while every request still succeeds', async () => {
  const a = await startBackend();
  const b = await startBackend();
  const dead = await closedPort();
  const p = await startProxy({ balancer: 'round-robin' });
  p.resolver.set(
    service('prod', 'web', {
      eps: { http: [ep('127.0.0.1', a.port), ep('127.0.0.1', b.port), ep('127.0.0.1', dead)] },
    }),
  );
  try {
    for (let i = 0; i < 20; i++)
      assert.equal((await send(p.egress, { headers: { host: 'web.prod' } })).status, 200);
    assert.equal(await metric(p, 'outrigger_endpoint_ejections_total', { service: 'prod/web' }), 1);
    assert.equal(await metric(p, 'outrigger_upstream_connect_errors_total', { service: 'prod/web' }), 5);
    assert.equal(
      await metric(p, 'outrigger_retries_total', { service: 'prod/web', reason: 'connect_failure' }),
      5,
    );
    assert.ok(p.log.lines.some((l) => l.msg === 'endpoint ejected' && l.endpoint === `127.0.0.1:${dead}`));
  } finally {
    await p.close();
    await a.close();
    await b.close();
  }
});

test('sessionAffinity ClientIP keeps a client on one endpoint', async () => {
  const backends = await Promise.all([startBackend(), startBackend(), startBackend()]);
  const p = await startProxy({ balancer: 'round-robin' });
  p.resolver.set(
    service('prod', 'sticky', {
      sessionAffinity: 'ClientIP',
      affinityTimeoutSeconds: 60,
      eps: { http: backends.map((b) => ep('127.0.0.1', b.port)) },
    }),
  );
  try {
    const bodies = new Set<string>();
    for (let i = 0; i < 9; i++) bodies.add((await send(p.egress, { headers: { host: 'sticky.prod' } })).body);
    assert.equal(bodies.size, 1);
  } finally {
    await p.close();
    await Promise.all(backends.map((b) => b.close()));
  }
});

test('a loop and a timeout are counted with their codes, and the 504 says why', async () => {
  const slow = await startBackend(() => {});
  const p = await startProxy({ requestTimeoutMs: 150 });
  p.resolver.set(service('prod', 'slow', { eps: { http: [ep('127.0.0.1', slow.port)] } }));
  try {
    const loop = await send(p.egress, { headers: { host: `localhost:${p.egress}` } });
    assert.equal(loop.status, 508);
    assert.match(loop.body, /own listener/);
    assert.equal(await metric(p, 'outrigger_requests_total', { status: '508', error: 'loop_detected' }), 1);
    const r = await send(p.egress, { headers: { host: 'slow.prod' } });
    assert.equal(r.status, 504);
    assert.match(r.body, /no response within 150 ms/);
  } finally {
    await p.close();
    await slow.close();
  }
});

test('live options are re-applied from changed annotations; an invalid change keeps the old values', () => {
  const log = memoryLogger('info');
  const sampling: number[] = [];
  const tracing = { setSampling: (r: number) => sampling.push(r) };
  assert.equal(
    applyLiveOptions(
      { env: {} },
      { 'outrigger.dev/log-level': 'warn', 'outrigger.dev/trace-sampling': '0.5' },
      { log, tracing },
    ),
    true,
  );
  assert.deepEqual(sampling, [0.5]);
  log.info('hidden at warn');
  assert.equal(
    log.lines.some((l) => l.msg === 'hidden at warn'),
    false,
  );
  assert.equal(
    applyLiveOptions({ env: {} }, { 'outrigger.dev/trace-sampling': '2' }, { log, tracing }),
    false,
  );
  assert.deepEqual(sampling, [0.5]);
  assert.ok(
    log.lines.some(
      (l) => String(l.msg).includes('invalid') && String(l.error).includes('outrigger.dev/trace-sampling'),
    ),
  );
  // Flags still win over annotations, as at start-up.
  applyLiveOptions(
    { env: {}, flags: { traceSampling: '0.1' } },
    { 'outrigger.dev/trace-sampling': '0.9' },
    { log, tracing },
  );
  assert.deepEqual(sampling, [0.5, 0.1]);
});
