import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closedPort, metric, send, startBackend, startProxy } from './harness.ts';

test('ingress forwards to the app on localhost with hygiene applied', async () => {
  const app = await startBackend();
  const p = await startProxy({ appPorts: [app.port] });
  try {
    const r = await send(p.ingress, {
      path: '/in',
      headers: { host: 'me.prod', connection: 'x-hop', 'x-hop': '1' },
    });
    assert.equal(r.status, 200);
    assert.equal(r.body, `hello from ${app.port}`);
    assert.equal(app.hits[0]?.url, '/in');
    assert.equal(app.hits[0]?.headers['x-hop'], undefined);
    assert.equal(app.hits[0]?.headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(await metric(p, 'outrigger_requests_total', { direction: 'ingress', status: '200' }), 1);
  } finally {
    await p.close();
    await app.close();
  }
});

test('ingress with the app down: 502 upstream_failed, counted', async () => {
  const p = await startProxy({ appPorts: [await closedPort()] });
  try {
    const r = await send(p.ingress, { headers: { host: 'me.prod' } });
    assert.equal(r.status, 502);
    assert.equal(r.headers['x-outrigger-error'], 'upstream_failed');
    assert.match(r.body, /ECONNREFUSED/);
    assert.equal(
      await metric(p, 'outrigger_requests_total', {
        direction: 'ingress',
        status: '502',
        error: 'upstream_failed',
      }),
      1,
    );
  } finally {
    await p.close();
  }
});

test('ingress with no app port configured: 502 with a clear body', async () => {
  const p = await startProxy();
  try {
    const r = await send(p.ingress, { headers: { host: 'me.prod' } });
    assert.equal(r.status, 502);
    assert.match(r.body, /no app port/);
  } finally {
    await p.close();
  }
});
