import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { constants } from 'node:http2';
import { ep, service } from '../../routing/fixtures.ts';
import { counted, startProxy, type Proxy } from '../harness.ts';
import { h2Client, h2Request } from './h2-harness.ts';
import { dataFrame, headersFrames, rawServer, rstFrame, type RawServer } from './frames.ts';

/**
 * RST_STREAM(NO_ERROR) from an upstream (RFC 9113 section 8.1): after a complete response it only
 * asks the client to stop sending its request body; before END_STREAM it cuts the response, which
 * the client must see as an abort, not as a clean (short) end. Upstreams write raw frames, since
 * node:http2's stream.close() ends the stream before resetting it.
 */
let proxy: Proxy;
const servers: RawServer[] = [];

before(async () => {
  proxy = await startProxy();
});

after(async () => {
  await proxy.close();
  for (const s of servers) s.close();
});

async function upstream(name: string, answer: Parameters<typeof rawServer>[0]): Promise<void> {
  const s = await rawServer(answer);
  servers.push(s);
  proxy.resolver.set(service('prod', name, { eps: { http: [ep('127.0.0.1', s.port)] } }));
}

const get = (authority: string): Record<string, string> => ({
  ':method': 'GET',
  ':path': '/',
  ':authority': authority,
});

test('a response cut by RST_STREAM(NO_ERROR) before END_STREAM reaches the client as a reset, counted as an error', async () => {
  await upstream('cut', (conn, id) => {
    // No content-length: only END_STREAM could tell the client the body is complete.
    conn.write(headersFrames(id, [[':status', '200']], false));
    conn.write(dataFrame(id, 'part-one ', false));
    conn.write(rstFrame(id, constants.NGHTTP2_NO_ERROR));
  });
  const c = await h2Client(proxy.egress);
  try {
    const r = await h2Request(c, get('cut.prod'));
    assert.equal(r.headers[':status'], 200);
    // What arrived before the reset is passed on; the reset may overtake it.
    assert.ok('part-one '.startsWith(r.body.toString()), r.body.toString());
    assert.equal(r.rstCode, constants.NGHTTP2_INTERNAL_ERROR, 'the client saw a clean end');
  } finally {
    c.close();
  }
  assert.equal(await counted(proxy, { service: 'prod/cut', status: '200', error: 'upstream_failed' }, 1), 1);
});

test('RST_STREAM(NO_ERROR) after a complete response (request body not read) stays a success', async () => {
  await upstream('early', (conn, id) => {
    conn.write(headersFrames(id, [[':status', '200']], false));
    conn.write(dataFrame(id, 'whole answer', true));
    conn.write(rstFrame(id, constants.NGHTTP2_NO_ERROR));
  });
  const c = await h2Client(proxy.egress);
  try {
    // The request body is still being sent when the answer comes.
    const s = c.request({ ...get('early.prod'), ':method': 'POST' });
    s.write('first part of a long upload');
    const chunks: Buffer[] = [];
    let status: unknown;
    s.once('response', (h) => (status = h[':status']));
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', () => {});
    const ended = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(false), 10_000);
      s.once('end', () => {
        clearTimeout(t);
        resolve(true);
      });
    });
    assert.ok(ended, 'the response ended');
    s.end();
    await new Promise<void>((resolve) => s.once('close', () => resolve()));
    assert.equal(status, 200);
    assert.equal(Buffer.concat(chunks).toString(), 'whole answer');
    assert.equal(s.rstCode, constants.NGHTTP2_NO_ERROR);
  } finally {
    c.close();
  }
  assert.equal(await counted(proxy, { service: 'prod/early', status: '200', error: '' }, 1), 1);
});
