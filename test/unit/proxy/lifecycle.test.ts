import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { ep, service } from '../routing/fixtures.ts';
import { eventually, send, startBackend, startProxy } from './harness.ts';

const refuses = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });

test('drain: ingress stops at once, egress serves until the app has gone, readiness drops', async () => {
  const app = await startBackend();
  const upstream = await startBackend();
  const p = await startProxy({ appPorts: [app.port] });
  p.resolver.set(service('prod', 'web', { eps: { http: [ep('127.0.0.1', upstream.port)] } }));
  try {
    assert.equal((await send(p.ingress, { headers: { host: 'me' } })).status, 200);
    const drained = p.dp.drain(30_000);
    await eventually('ingress refuses connections', () => refuses(p.ingress));
    assert.equal((await send(p.admin, { path: '/readyz' })).status, 503);
    // The app is still running (it may be finishing its own requests): egress keeps working.
    assert.equal((await send(p.egress, { headers: { host: 'web.prod' } })).status, 200);
    let finished = false;
    void drained.then(() => (finished = true));
    assert.equal(finished, false);
    await app.close();
    await drained;
    assert.equal(await refuses(p.egress), true);
  } finally {
    await p.close();
    await upstream.close();
  }
});

test('drain without app ports ends once nothing is in flight', async () => {
  const p = await startProxy();
  try {
    await p.dp.drain(30_000);
    assert.equal(await refuses(p.egress), true);
  } finally {
    await p.close();
  }
});

test('drain: an app bound to the pod IP only still counts as running', async () => {
  // 127.0.0.2 plays the pod IP; nothing listens on 127.0.0.1 at the app's port.
  const app = createServer((_req, res) => res.end('app'));
  await new Promise<void>((r) => app.listen(0, '127.0.0.2', r));
  const port = (app.address() as AddressInfo).port;
  const p = await startProxy({ appPorts: [port] }, { podIP: '127.0.0.2' });
  try {
    const drained = p.dp.drain(30_000);
    let finished = false;
    void drained.then(() => (finished = true));
    await new Promise((r) => setTimeout(r, 1_500));
    assert.equal(finished, false, 'egress still serves while the app runs on the pod IP');
    await new Promise<void>((r) => app.close(() => r()));
    await drained;
    assert.equal(await refuses(p.egress), true);
  } finally {
    app.close();
    await p.close();
  }
});
