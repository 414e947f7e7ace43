import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { hostname } from 'node:os';
import { isLocalAddress } from '../../../src/proxy/capture/original-destination.ts';
import { metric, raw, send, startBackend, startProxy, type Backend, type Proxy } from './harness.ts';

/**
 * The loop guard refuses by the address a destination really is (numeric, IPv4-mapped and
 * wildcard forms, names resolving to this host), and a hop marker catches loops that leave the
 * host and come back; two sidecars in a row (egress of one pod, ingress of the next) still work.
 */
let proxy: Proxy;
let app: Backend;

before(async () => {
  app = await startBackend();
  proxy = await startProxy({ appPorts: [app.port] });
});

after(async () => {
  await proxy.close();
  await app.close();
});

const egressRequests = (p: Proxy): Promise<number> =>
  metric(p, 'outrigger_requests_total', { direction: 'egress' });

async function assertLoopRefused(p: Proxy, path: string, host: string): Promise<void> {
  const before = await egressRequests(p);
  const reply = await raw(p.egress, `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  assert.match(reply, /^HTTP\/1\.1 508 /, `${path} Host ${host}: ${reply.slice(0, 120)}`);
  assert.match(reply, /x-outrigger-error: loop_detected/i);
  assert.equal(await egressRequests(p), before + 1, 'the request never re-entered the sidecar');
}

for (const form of ['[::ffff:127.0.0.1]', '0', '2130706433', '[::ffff:7f00:1]', '0x7f.1', '127.1', '[::]']) {
  test(`a Host of ${form}:<egress port> is refused as a loop`, async () => {
    await assertLoopRefused(proxy, '/', `${form}:${proxy.egress}`);
  });
  test(`an absolute-form target http://${form}:<egress port>/ is refused as a loop`, async () => {
    await assertLoopRefused(proxy, `http://${form}:${proxy.egress}/`, 'ignored');
  });
}

test('a name that resolves to this host is refused as a loop', async () => {
  const name = hostname();
  const { address } = await lookup(name);
  assert.ok(isLocalAddress(address), `precondition: ${name} resolves to this host (${address})`);
  await assertLoopRefused(proxy, '/', `${name}:${proxy.egress}`);
});

test('a CONNECT to an IPv4-mapped form of the egress listener is refused as a loop', async () => {
  const reply = await raw(
    proxy.egress,
    `CONNECT [::ffff:127.0.0.1]:${proxy.egress} HTTP/1.1\r\nHost: x\r\n\r\n`,
  );
  assert.match(reply, /^HTTP\/1\.1 508 /, reply);
});

test('a loop that leaves the sidecar and comes back is refused at its second pass', async () => {
  // A TCP relay on loopback that sends every connection back to the egress listener.
  let relayed = 0;
  const relay: Server = createServer((s) => {
    relayed++;
    const back = connect({ host: '127.0.0.1', port: proxy.egress });
    s.pipe(back).pipe(s);
    s.on('error', () => back.destroy());
    back.on('error', () => s.destroy());
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  try {
    const port = (relay.address() as AddressInfo).port;
    const r = await send(proxy.egress, { headers: { host: `127.0.0.1:${port}` } });
    assert.equal(r.status, 508);
    assert.equal(r.headers['x-outrigger-error'], 'loop_detected');
    assert.equal(relayed, 1, 'the request went round once');
  } finally {
    relay.close();
  }
});

test('egress of one sidecar to the ingress of another reaches the app, without the marker', async () => {
  const other = await startProxy({ appPorts: [app.port] });
  try {
    app.hits.length = 0;
    const r = await send(proxy.egress, {
      path: '/two-hops',
      headers: { host: `127.0.0.1:${other.ingress}` },
    });
    assert.equal(r.status, 200);
    assert.equal(app.hits.length, 1);
    assert.equal(
      Object.keys(app.hits[0]?.headers ?? {}).some((h) => h.startsWith('x-outrigger')),
      false,
      JSON.stringify(app.hits[0]?.headers),
    );
  } finally {
    await other.close();
  }
});

test('a pod reaches its own app through its own ingress listener (not a loop)', async () => {
  const r = await send(proxy.egress, { headers: { host: `127.0.0.1:${proxy.ingress}` } });
  assert.equal(r.status, 200);
  assert.equal(r.body, `hello from ${app.port}`);
});
