import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tcpDialer, type Dial } from '../../../../src/proxy/dial.ts';
import { H2SessionPool } from '../../../../src/proxy/h2/session-pool.ts';
import { systemClock } from '../../../../src/shared/clock.ts';
import { startH2Backend } from './h2-harness.ts';

test('an h2 session dialled for one namespace never carries a stream for an endpoint of another', async (t) => {
  const backend = await startH2Backend();
  t.after(() => backend.close());
  // The dial (the mesh dialer in a sidecar) checks the namespace it is given: record it.
  const dialled: (string | undefined)[] = [];
  const plain = tcpDialer(systemClock, 2_000);
  const dial: Dial = (host, port, cb, namespace) => {
    dialled.push(namespace);
    plain(host, port, cb);
  };
  const pool = new H2SessionPool({ clock: systemClock, connectTimeoutMs: 2_000, dial });
  t.after(() => pool.close());
  const id = `127.0.0.1:${backend.port}`;
  const call = async (namespace: string | undefined) => {
    const stream = await pool.request(
      { id, host: '127.0.0.1', port: backend.port, ...(namespace ? { namespace } : {}) },
      { ':method': 'POST', ':path': '/x', 'content-type': 'application/grpc' },
      {},
    );
    stream.end();
    stream.resume();
    await new Promise((r) => stream.once('close', r));
  };
  await call('shop');
  await call('shop');
  await call('prod');
  await call(undefined);
  assert.deepEqual(dialled, ['shop', 'prod', undefined], 'one session per namespace, reused within it');
});
