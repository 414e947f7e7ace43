import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appHealth } from '../../../src/admin/app-health.ts';
import { appProbes, parseValue } from '../../../src/config/parse.ts';
import { startHealthServer } from '../../harness/grpc-health-server.ts';
import { closedPort, send, startBackend, startProxy } from '../proxy/harness.ts';

test('the admin port replays rewritten app probes: HTTP 200-399 and TCP connects pass, the rest 503', async (t) => {
  let status = 204;
  const app = await startBackend((req, res) => {
    res.statusCode = req.headers['x-probe'] === '1' ? status : 400;
    res.end();
  });
  t.after(() => app.close());
  const dead = await closedPort();
  const probes = parseValue(
    appProbes,
    'OUTRIGGER_APP_PROBES',
    JSON.stringify({
      '/app-health/web/readyz': { port: app.port, path: '/ready', headers: { 'x-probe': '1' } },
      '/app-health/web/livez': { port: app.port },
      '/app-health/web/startupz': { port: dead },
    }),
    'env',
  );
  const p = await startProxy({}, { appHealth: appHealth(probes, '127.0.0.1') });
  t.after(() => p.close());
  assert.equal((await send(p.admin, { path: '/app-health/web/readyz' })).status, 200);
  assert.equal((await send(p.admin, { path: '/app-health/web/livez' })).status, 200, 'TCP connect');
  assert.equal((await send(p.admin, { path: '/app-health/web/startupz' })).status, 503, 'refused');
  status = 500;
  assert.equal((await send(p.admin, { path: '/app-health/web/readyz' })).status, 503);
  status = 302;
  assert.equal((await send(p.admin, { path: '/app-health/web/readyz' })).status, 200, 'kubelet passes 3xx');
  assert.equal((await send(p.admin, { path: '/app-health/other/readyz' })).status, 404);
});

test('a gRPC probe is replayed as the standard health check, the reason of a failure in the body', async (t) => {
  const app = await startHealthServer(
    new Map([
      ['shop.Cart', 'SERVING'],
      ['shop.Pay', 'NOT_SERVING'],
      ['', 'hang'],
    ]),
  );
  t.after(() => app.close());
  const probes = parseValue(
    appProbes,
    'OUTRIGGER_APP_PROBES',
    JSON.stringify({
      '/app-health/cart/readyz': { port: app.port, grpc: { service: 'shop.Cart' } },
      '/app-health/cart/livez': { port: app.port, grpc: { service: 'shop.Pay' } },
      '/app-health/cart/startupz': { port: app.port, grpc: {}, timeoutMs: 200 },
    }),
    'env',
  );
  const p = await startProxy({}, { appHealth: appHealth(probes, '127.0.0.1') });
  t.after(() => p.close());
  assert.equal((await send(p.admin, { path: '/app-health/cart/readyz' })).status, 200);
  const notServing = await send(p.admin, { path: '/app-health/cart/livez' });
  assert.equal(notServing.status, 503);
  assert.equal(notServing.body, 'app probe failed: status NOT_SERVING\n');
  const hung = await send(p.admin, { path: '/app-health/cart/startupz' });
  assert.equal(hung.status, 503);
  assert.equal(hung.body, 'app probe failed: no answer within 200 ms\n', "the probe's own timeout");
});

test('OUTRIGGER_APP_PROBES that is not the injector shape is refused with the key', () => {
  for (const bad of [
    '[]',
    'nope',
    '{"/elsewhere":{"port":1}}',
    '{"/app-health/a/readyz":{"port":0}}',
    '{"/app-health/a/readyz":{"port":1,"grpc":{"service":7}}}',
    '{"/app-health/a/readyz":{"port":1,"grpc":{},"path":"/"}}',
    '{"/app-health/a/readyz":{"port":1,"timeoutMs":0}}',
  ])
    assert.throws(
      () => parseValue(appProbes, 'OUTRIGGER_APP_PROBES', bad, 'env'),
      /OUTRIGGER_APP_PROBES=/,
      bad,
    );
});
