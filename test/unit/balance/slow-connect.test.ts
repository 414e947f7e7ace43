import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import test from 'node:test';
import { Metrics } from '../../../src/admin/metrics.ts';
import { createUpstream } from '../../../src/compose/upstream.ts';
import { balancedAttempts } from '../../../src/proxy/egress-plan.ts';
import type { ForwardPlan, Upstream } from '../../../src/proxy/forward.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { noopHop } from '../../../src/tracing/hop.ts';
import { FakeClock } from '../../harness/fake-clock.ts';

/**
 * Peak-EWMA must time the request, not the connection it waited for: an endpoint whose first
 * connection was slow to set up (a TLS handshake on a busy node, a slow accept) is as fast as the
 * others once connected, and must get its share of one-at-a-time calls. The balancer's clock is
 * a fake one that moves only while the slow connection is set up, so every request takes no time
 * and the machine's own latency spikes (which peak-EWMA rightly follows) cannot sway the spread.
 */
const CALLS = 300;
const SLOW_CONNECT_MS = 300;

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

async function get(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: '/' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    })
      .on('error', reject)
      .end();
  });
}

test('an endpoint whose first connection was slow still gets its share of P2C calls', async (t) => {
  const backends: Server[] = [];
  const ups: Upstream[] = [];
  for (let i = 0; i < 3; i++) {
    const id = String(i);
    const server = createServer((_req, res) => res.end(id));
    backends.push(server);
    const port = await listen(server);
    ups.push({ id: `127.0.0.1:${port}`, host: '127.0.0.1', port });
  }
  const slowPort = ups[0]!.port;
  let slowDialed = false;
  const clock = new FakeClock();
  const { balancers, forwarder, upstream } = createUpstream(
    { balancer: 'p2c-ewma', connectTimeoutMs: 5_000, requestTimeoutMs: 5_000, idleTimeoutMs: 5_000 },
    {
      metrics: new Metrics(),
      log: createLogger({ write: () => {} }),
      clock,
      random: Math.random,
      // The first connection to one endpoint is handed over only SLOW_CONNECT_MS after it
      // connected; requests on it are then as fast as on any other endpoint.
      dial: (host, port, cb) => {
        const socket = connect({ host, port, noDelay: true });
        socket.once('error', (e) => cb(e));
        socket.once('connect', () => {
          socket.removeAllListeners('error');
          const slow = port === slowPort && !slowDialed;
          if (port === slowPort) slowDialed = true;
          if (!slow) return cb(null, socket);
          void clock.advance(SLOW_CONNECT_MS).then(() => cb(null, socket));
        });
      },
    },
  );
  const balancer = balancers.for('shop/web');
  const ids = ups.map((u) => u.id);
  const plan: ForwardPlan = {
    ...balancedAttempts(balancer, 'shop/web', ids, {
      retryStatuses: new Set(),
      maxAttempts: 1,
    }),
    next: (tried) => {
      const id = balancer.pick(ids, tried);
      return ups.find((u) => u.id === id);
    },
  };
  const proxy = createServer((req, res) => void forwarder.forward(req, res, plan, noopHop));
  const proxyPort = await listen(proxy);
  t.after(() => {
    proxy.closeAllConnections();
    proxy.close();
    upstream.close();
    for (const b of backends) {
      b.closeAllConnections();
      b.close();
    }
  });

  const served = [0, 0, 0];
  for (let i = 0; i < CALLS; i++) served[Number(await get(proxyPort))]!++;
  t.diagnostic(`served ${served.join('/')}; ${JSON.stringify(balancer.view())}`);
  assert.ok(slowDialed, 'the slow endpoint was dialed');
  // Round robin would give 100 each; equally fast endpoints picked two at random are within
  // 33 % +- 10 % (about 3.7 standard deviations of a fair pick).
  for (const n of served) assert.ok(n >= 69 && n <= 129, `served ${served.join('/')}`);
});
