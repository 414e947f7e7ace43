// The Gateways' pod ports with real sockets: each binding's port answers as its Gateway (via()),
// a binding gone closes its port, and a port that cannot be opened is retried at the next bind.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer as createNetServer } from 'node:net';
import { test } from 'node:test';
import { createServer, request } from '../../../src/shared/node-http.ts';
import type { Binding } from '../../../src/gateway/addresses.ts';
import { GatewayPorts } from '../../../src/gateway/gateway-ports.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const PORT_A = 29_871;
const PORT_B = 29_872;
const binding = (gateway: string, podPort: number): Binding => ({
  gateway,
  port: 80,
  protocol: 'HTTP',
  podPort,
});

function get(port: number): Promise<string> {
  return new Promise((resolve) => {
    const r = request({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve(body));
    });
    r.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    r.end();
  });
}

test("each Gateway's pod port is answered as that Gateway; a binding gone closes its port", async (t) => {
  const ports: { p?: GatewayPorts } = {};
  const http = createServer((req, res) => res.end(ports.p?.via(req.socket.localPort)?.gateway ?? 'shared'));
  const p = new GatewayPorts({
    host: '127.0.0.1',
    accept: { http: (s) => http.emit('connection', s) },
    log: memoryLogger('error'),
  });
  ports.p = p;
  t.after(() => p.close());
  await p.bind([binding('infra/a', PORT_A), binding('infra/b', PORT_B)]);
  assert.deepEqual([await get(PORT_A), await get(PORT_B)], ['infra/a', 'infra/b']);
  // A connection open on b's port when b goes is closed, not served as the shared ports are.
  const open = connect(PORT_B, '127.0.0.1');
  await once(open, 'connect');
  const closed = once(open, 'close');
  await p.bind([binding('infra/a', PORT_A)]);
  await closed;
  assert.equal(await get(PORT_B), 'ECONNREFUSED');
  assert.equal(await get(PORT_A), 'infra/a', 'the other port untouched');
});

test('a port in use is retried at the next bind', async (t) => {
  const squatter = createNetServer();
  await new Promise<void>((r) => squatter.listen(PORT_B, '127.0.0.1', r));
  const http = createServer((_req, res) => res.end('ok'));
  const log = memoryLogger('warn');
  const p = new GatewayPorts({ host: '127.0.0.1', accept: { http: (s) => http.emit('connection', s) }, log });
  t.after(() => p.close());
  await p.bind([binding('infra/b', PORT_B)]);
  assert.deepEqual(p.listening(), []);
  await new Promise((r) => squatter.close(r));
  await p.bind([binding('infra/b', PORT_B)]);
  assert.equal(await get(PORT_B), 'ok');
});
