import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ep, service } from '../routing/fixtures.ts';
import { raw, startBackend, startProxy, type Backend, type Proxy } from './harness.ts';

/**
 * Host always reaches the app, and it always agrees with the request target: Connection cannot
 * remove it, and an absolute-form target on ingress becomes origin-form with the target's
 * authority as Host (RFC 9112 section 3.2.2), so an app cannot be told two different hosts.
 */
let app: Backend;
let proxy: Proxy;

before(async () => {
  app = await startBackend();
  proxy = await startProxy({ appPorts: [app.port] });
  proxy.resolver.set(service('prod', 'web', { eps: { http: [ep('127.0.0.1', app.port)] } }));
});

after(async () => {
  await proxy.close();
  await app.close();
});

async function lastHit(port: number, request: string): Promise<Backend['hits'][number] | undefined> {
  app.hits.length = 0;
  const reply = await raw(port, request);
  assert.match(reply, /^HTTP\/1\.1 200 /, reply);
  assert.equal(app.hits.length, 1);
  return app.hits[0];
}

for (const listener of ['egress', 'ingress'] as const) {
  test(`${listener}: a Connection header naming Host does not remove it`, async () => {
    const hit = await lastHit(
      proxy[listener],
      'GET /h HTTP/1.1\r\nHost: web.prod\r\nConnection: host, close\r\n\r\n',
    );
    assert.equal(hit?.headers.host, 'web.prod');
  });
}

test('ingress: an absolute-form target reaches the app in origin-form with a matching Host', async () => {
  const hit = await lastHit(
    proxy.ingress,
    'GET http://evil.example:9999/x?y=1 HTTP/1.1\r\nHost: me.prod\r\nConnection: close\r\n\r\n',
  );
  assert.equal(hit?.url, '/x?y=1');
  assert.equal(hit?.headers.host, 'evil.example:9999');
});

test('ingress: a malformed absolute-form target is a 400', async () => {
  const reply = await raw(proxy.ingress, 'GET http://[zz/x HTTP/1.1\r\nHost: me.prod\r\n\r\n');
  assert.match(reply, /^HTTP\/1\.1 400 /, reply);
});
