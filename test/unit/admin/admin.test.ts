import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isLoopback } from '../../../src/admin/server.ts';
import { send, startProxy } from '../proxy/harness.ts';

test('/healthz, /readyz and /metrics answer; readiness follows discovery', async () => {
  const p = await startProxy(
    {},
    { configView: () => ({ tokenDir: '/x', token: 'eyJsecret', logLevel: 'info' }) },
  );
  try {
    assert.equal((await send(p.admin, { path: '/healthz' })).status, 200);
    p.resolver.isReady = false;
    const notReady = await send(p.admin, { path: '/readyz' });
    assert.equal(notReady.status, 503);
    assert.equal((JSON.parse(notReady.body) as { ready: boolean }).ready, false);
    p.resolver.isReady = true;
    const ready = await send(p.admin, { path: '/readyz' });
    assert.equal(ready.status, 200);
    assert.match(ready.body, /"discovery"/);
    const m = await send(p.admin, { path: '/metrics' });
    assert.equal(m.status, 200);
    for (const name of [
      'outrigger_requests_total',
      'outrigger_request_duration_seconds',
      'outrigger_upstream_connect_errors_total',
      'outrigger_endpoint_ejections_total',
      'outrigger_retries_total',
      'outrigger_discovery_stale_services',
      'outrigger_discovery_watches',
      'outrigger_discovery_staleness_seconds',
    ])
      assert.match(m.body, new RegExp(`# TYPE ${name} `), name);
  } finally {
    await p.close();
  }
});

test('/debug sections answer on loopback with secrets redacted', async () => {
  const p = await startProxy(
    {},
    { configView: () => ({ tokenDir: '/x', token: 'eyJsecret', logLevel: 'info' }) },
  );
  try {
    const cfg = await send(p.admin, { path: '/debug/config' });
    assert.equal(cfg.status, 200);
    assert.doesNotMatch(cfg.body, /eyJsecret/);
    assert.match(cfg.body, /"token": "\[redacted\]"/);
    assert.equal((await send(p.admin, { path: '/debug/discovery' })).status, 200);
    const index = await send(p.admin, { path: '/debug/nope' });
    assert.equal(index.status, 404);
    assert.match(index.body, /discovery/);
    assert.equal((await send(p.admin, { path: '/drain' })).status, 405);
  } finally {
    await p.close();
  }
});

test('only loopback peers count as local for /debug', () => {
  for (const a of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1']) assert.equal(isLoopback(a), true, a);
  for (const a of ['10.0.0.1', '::ffff:10.0.0.1', 'fd00::1', undefined, ''])
    assert.equal(isLoopback(a), false, String(a));
});
