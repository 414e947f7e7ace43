import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { listenOn } from '../../../src/shared/listen.ts';

test('listenOn falls back to the IPv4 wildcard only when IPv6 is unavailable', async () => {
  const s = createServer();
  // Simulate a pod without IPv6: the first listen on '::' fails with EAFNOSUPPORT.
  const real = s.listen.bind(s) as (port: number, host: string, cb: () => void) => Server;
  let calls = 0;
  (s as unknown as { listen: unknown }).listen = (port: number, host: string, cb: () => void) => {
    calls++;
    if (host === '::') {
      process.nextTick(() => s.emit('error', Object.assign(new Error('no v6'), { code: 'EAFNOSUPPORT' })));
      return s;
    }
    return real(port, host, cb);
  };
  await listenOn(s, 0, '::');
  assert.equal(calls, 2);
  assert.equal((s.address() as AddressInfo).address, '0.0.0.0');
  s.close();
});

test('listenOn passes other errors on', async () => {
  const a = createServer();
  await listenOn(a, 0, '127.0.0.1');
  const b = createServer();
  await assert.rejects(listenOn(b, (a.address() as AddressInfo).port, '127.0.0.1'), /EADDRINUSE/);
  a.close();
});
