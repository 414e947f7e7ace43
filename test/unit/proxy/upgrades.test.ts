import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ep, service } from '../routing/fixtures.ts';
import {
  raw,
  startProxy,
  startRecorder,
  tcpExchange,
  type Backend,
  type Proxy,
  type Received,
} from './harness.ts';

/**
 * Upgrades the proxy does not tunnel (anything but WebSocket, such as the h2c upgrade Java's
 * HttpClient sends on http:// URLs) are ignored as RFC 9110 section 7.8 allows: the request goes on
 * as HTTP/1.1 without Upgrade. Upgrade and CONNECT requests get the same request checks as others.
 */
let app: Backend & { got: Received[] };
let proxy: Proxy;

before(async () => {
  app = await startRecorder((r, res) => res.end(`plain answer to ${r.method}`));
  proxy = await startProxy({ appPorts: [app.port] });
  proxy.resolver.set(service('prod', 'web', { eps: { http: [ep('127.0.0.1', app.port)] } }));
});

after(async () => {
  await proxy.close();
  await app.close();
});

const h2c = (host: string, method = 'GET', body = ''): string =>
  `${method} /h2c HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n` +
  `HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n${body ? `Content-Length: ${body.length}\r\n` : ''}` +
  `\r\n${body}`;

const answered = (got: string): boolean => /plain answer to \w+$/.test(got);

for (const listener of ['egress', 'ingress'] as const) {
  test(`${listener}: an h2c upgrade is ignored and the request answered as HTTP/1.1`, async () => {
    app.hits.length = 0;
    const reply = await tcpExchange(proxy[listener], h2c('web.prod'), answered);
    assert.match(reply, /^HTTP\/1\.1 200 /, reply);
    assert.match(reply, /plain answer to GET/);
    assert.equal(app.hits.length, 1);
    const seen = app.hits[0]?.headers ?? {};
    assert.equal(seen.upgrade, undefined, 'Upgrade was not forwarded');
    assert.equal(seen['http2-settings'], undefined, 'the header Connection named was not forwarded');
  });

  test(`${listener}: an h2c upgrade on a POST keeps its body`, async () => {
    app.got.length = 0;
    const reply = await tcpExchange(proxy[listener], h2c('web.prod', 'POST', 'h2c-body'), answered);
    assert.match(reply, /^HTTP\/1\.1 200 /, reply);
    assert.deepEqual(
      app.got.map((r) => r.body),
      ['h2c-body'],
    );
  });

  test(`${listener}: a WebSocket upgrade with a repeated Host is a 400`, async () => {
    app.hits.length = 0;
    const reply = await raw(
      proxy[listener],
      'GET / HTTP/1.1\r\nHost: web.prod\r\nHost: other\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    assert.match(reply, /^HTTP\/1\.1 400 /, reply);
    assert.match(reply, /x-outrigger-error: bad_request/i);
    assert.equal(app.hits.length, 0);
  });
}

test('egress: a CONNECT with a repeated Host is a 400', async () => {
  const reply = await raw(
    proxy.egress,
    `CONNECT 127.0.0.1:${app.port} HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n`,
  );
  assert.match(reply, /^HTTP\/1\.1 400 /, reply);
});

test('egress: a CONNECT with more headers than allowed is a 431', async () => {
  const many = Array.from({ length: 120 }, (_, i) => `X-H${i}: v\r\n`).join('');
  const reply = await raw(proxy.egress, `CONNECT 127.0.0.1:${app.port} HTTP/1.1\r\nHost: a\r\n${many}\r\n`);
  assert.match(reply, /^HTTP\/1\.1 431 /, reply);
});
