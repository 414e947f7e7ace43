import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, test } from 'node:test';
import {
  decodeSockaddr,
  isOwnListener,
  originalDestination,
  unmapped,
} from '../../../src/proxy/capture/original-destination.ts';

/** A struct sockaddr as the kernel writes it: family in host order, port in network order. */
function sockaddr(family: number, port: number, addr: number[]): Buffer {
  const b = Buffer.alloc(28);
  if (process.arch === 'ppc64' || process.arch === 's390x') b.writeUInt16BE(family, 0);
  else b.writeUInt16LE(family, 0);
  b.writeUInt16BE(port, 2);
  Buffer.from(addr).copy(b, family === 2 ? 4 : 8);
  return b;
}

describe('decodeSockaddr', () => {
  test('IPv4', () => {
    assert.deepEqual(decodeSockaddr(sockaddr(2, 8080, [10, 96, 0, 10])), {
      address: '10.96.0.10',
      port: 8080,
    });
  });

  test('IPv6 comes back in canonical compressed form', () => {
    const v6 = [0xfd, 0, 0, 0x10, 0, 0x96, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a];
    assert.deepEqual(decodeSockaddr(sockaddr(10, 443, v6)), { address: 'fd00:10:96::a', port: 443 });
    const loop = [...Array<number>(15).fill(0), 1];
    assert.deepEqual(decodeSockaddr(sockaddr(10, 1, loop)), { address: '::1', port: 1 });
  });

  test('IPv4-mapped IPv6 is reported as IPv4', () => {
    const mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7];
    assert.deepEqual(decodeSockaddr(sockaddr(10, 80, mapped)), { address: '192.0.2.7', port: 80 });
  });

  test('an unknown family is undefined', () => {
    assert.equal(decodeSockaddr(sockaddr(1, 80, [1, 2, 3, 4])), undefined);
  });
});

describe('isOwnListener (the loop guard)', () => {
  const listeners = [{ address: '127.0.0.1', port: 7400 }, { address: '::', port: 7401 }, { port: 7402 }];
  const podIp = '10.244.0.5';
  const isLocal = (a: string): boolean => a === podIp || a.startsWith('127.') || a === '::1';

  test('a specific listener matches only its own address and port', () => {
    assert.equal(isOwnListener({ address: '127.0.0.1', port: 7400 }, listeners, isLocal), true);
    assert.equal(isOwnListener({ address: '::ffff:127.0.0.1', port: 7400 }, listeners, isLocal), true);
    assert.equal(isOwnListener({ address: podIp, port: 7400 }, listeners, isLocal), false);
  });

  test('a wildcard listener matches any local address on its port', () => {
    assert.equal(isOwnListener({ address: podIp, port: 7401 }, listeners, isLocal), true);
    assert.equal(isOwnListener({ address: '::1', port: 7402 }, listeners, isLocal), true);
  });

  test('another pod on the same port is not us', () => {
    assert.equal(isOwnListener({ address: '10.244.0.9', port: 7401 }, listeners, isLocal), false);
    assert.equal(isOwnListener({ address: '10.96.0.10', port: 80 }, listeners, isLocal), false);
  });

  test('the default locality check knows loopback', () => {
    assert.equal(isOwnListener({ address: '127.0.0.1', port: 7402 }, listeners), true);
    assert.equal(isOwnListener({ address: '192.0.2.1', port: 7402 }, listeners), false);
  });
});

describe('originalDestination', () => {
  test('a socket without a descriptor has none', () => {
    assert.equal(originalDestination(new net.Socket()), undefined);
  });

  test('an unredirected loopback connection yields nothing or its own address, never garbage', async () => {
    const server = net.createServer();
    const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    const client = net.connect(port, '127.0.0.1');
    const sock = await accepted;
    try {
      const dest = originalDestination(sock);
      // With no NAT in this namespace the kernel answers ENOENT; with NAT loaded it reports the
      // socket's own address, which is what the loop guard is for.
      if (dest !== undefined) assert.deepEqual(dest, { address: '127.0.0.1', port });
    } finally {
      client.destroy();
      sock.destroy();
      server.close();
    }
  });

  test('unmapped turns only IPv4-mapped addresses into IPv4', () => {
    assert.equal(unmapped('::ffff:10.0.0.1'), '10.0.0.1');
    assert.equal(unmapped('::ffff:a00:1'), '10.0.0.1');
    assert.equal(unmapped('::fffe:a00:1'), '::fffe:a00:1');
    assert.equal(unmapped('fd00::1'), 'fd00::1');
  });
});
