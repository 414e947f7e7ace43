import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Destination } from '../../../src/proxy/capture-port.ts';
import { podAddressCheck } from '../../../src/proxy/pod-addresses.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { raw, send, startBackend, startProxy, type Backend, type Proxy } from './harness.ts';

/**
 * Under transparent capture the listeners serve only connections the pod's capture rules
 * redirected to them. Ingress delivers only to original destinations that are this pod's own
 * addresses (never loopback, never a fallback app port): a direct connection to the ingress port
 * cannot reach an app port bound to 127.0.0.1 only. Egress needs an original destination too.
 */
let app: Backend;
let proxy: Proxy;
let original: Destination | undefined;
const POD_IP = '127.0.0.2'; // plays the pod IP; the app below is bound to 127.0.0.1 only

before(async () => {
  app = await startBackend();
  proxy = await startProxy(
    { capture: 'transparent', appPorts: [app.port] },
    { originalDestination: () => original, detectTimeoutMs: 100, isPodAddress: (a) => a === POD_IP },
  );
});

after(async () => {
  await proxy.close();
  await app.close();
});

const misdirected = async (port: number, what: string): Promise<void> => {
  app.hits.length = 0;
  const r = await send(port, { headers: { host: `127.0.0.1:${app.port}` } });
  assert.equal(r.status, 421, `${what}: ${r.status} ${r.body}`);
  assert.equal(r.headers['x-outrigger-error'], 'misdirected');
  assert.equal(app.hits.length, 0, `${what}: the localhost-only app was not reached`);
};

test('ingress: a connection that was not redirected (no original destination) is refused', async () => {
  original = undefined;
  await misdirected(proxy.ingress, 'no original destination');
});

test('ingress: an original destination on loopback is refused', async () => {
  original = { address: '127.0.0.1', port: app.port };
  await misdirected(proxy.ingress, 'loopback');
});

test("ingress: an original destination that is not one of the pod's addresses is refused", async () => {
  original = { address: '10.1.2.3', port: app.port };
  await misdirected(proxy.ingress, 'another address');
});

test('ingress: a non-HTTP stream without an original destination is closed unanswered', async () => {
  original = undefined;
  app.hits.length = 0;
  const reply = await raw(proxy.ingress, '\u0000binary', 3_000);
  assert.equal(reply, '', 'closed without a byte');
});

test('egress: a request that was not redirected is refused, not routed by its Host', async () => {
  original = undefined;
  await misdirected(proxy.egress, 'egress without an original destination');
});

test("the pod's addresses: OUTRIGGER_POD_IP and the interfaces, never loopback", () => {
  const clock = new FakeClock();
  let reads = 0;
  const interfaces = () => {
    reads++;
    return {
      lo: [
        { address: '127.0.0.1', internal: true },
        { address: '::1', internal: true },
      ],
      eth0: [
        { address: '10.244.0.6', internal: false },
        { address: 'fd00:10:244::6', internal: false },
      ],
    };
  };
  const isPod = podAddressCheck({ podIPs: ['10.244.9.9'], clock, interfaces });
  assert.equal(isPod('10.244.9.9'), true, 'OUTRIGGER_POD_IP');
  assert.equal(isPod('10.244.0.6'), true);
  assert.equal(isPod('::ffff:10.244.0.6'), true, 'IPv4-mapped');
  assert.equal(isPod('fd00:10:244::6'), true);
  for (const a of ['127.0.0.1', '::1', '127.0.0.2', '0.0.0.0', '10.244.0.7'])
    assert.equal(isPod(a), false, a);
  // A miss re-reads the interfaces at most once a second (an address added after start).
  const before = reads;
  isPod('10.244.0.8');
  isPod('10.244.0.8');
  assert.ok(reads - before <= 1);
});
