import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClientMesh } from '../../../src/mesh/client-mesh.ts';
import type { SidecarIdentity } from '../../../src/mesh/sidecar-identity.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

/** A started identity whose dialer records its calls. */
function startedIdentity(certified: boolean): SidecarIdentity & { dials: string[]; closed: boolean } {
  const out = {
    dials: [] as string[],
    closed: false,
    wiring: {
      dial: (host: string, port: number, cb: (err: Error | null) => void, ns?: string, meshed?: boolean) => {
        out.dials.push(`${host}:${port} ${ns} ${meshed}`);
        cb(null);
      },
      ready: () => certified,
      stats: () => ({ mtls: 1 }),
    },
    view: () => ({ certificate: certified }),
    close: () => void (out.closed = true),
  };
  return out as unknown as SidecarIdentity & { dials: string[]; closed: boolean };
}

const dialErr = (mesh: ClientMesh): Promise<Error | null> =>
  new Promise((resolve) => mesh.dial('10.0.0.1', 8080, (err) => resolve(err), 'shop', true));

test('until its identity starts, the mesh client refuses every dial and is unready; it retries the start', async () => {
  const clock = new FakeClock();
  const log = memoryLogger();
  const identity = startedIdentity(true);
  let calls = 0;
  const mesh = new ClientMesh({
    start: () => {
      calls++;
      if (calls < 3) return Promise.reject(new Error('trust bundle /etc/outrigger/trust/ca.crt: ENOENT'));
      return Promise.resolve(identity);
    },
    clock,
    log,
    retryMs: 5_000,
  });
  await clock.advance(0);
  assert.equal(mesh.ready(), false);
  assert.match(String(await dialErr(mesh)), /no mesh identity yet: trust bundle .*ENOENT/);
  assert.deepEqual(mesh.view(), {
    started: false,
    problem: 'trust bundle /etc/outrigger/trust/ca.crt: ENOENT',
  });
  await clock.advance(5_000);
  assert.equal(calls, 2);
  assert.equal(
    log.lines.filter((l) => l.msg === 'mesh identity not started; retrying').length,
    1,
    'the same problem is logged once',
  );
  await clock.advance(5_000);
  assert.equal(calls, 3);
  assert.equal(mesh.ready(), true);
  assert.equal(await dialErr(mesh), null);
  assert.deepEqual(identity.dials, ['10.0.0.1:8080 shop true'], "dials go through the identity's dialer");
  assert.deepEqual(mesh.view(), { certificate: true, dial: { mtls: 1 } });
  assert.ok(log.lines.some((l) => l.msg === 'mesh identity started'));
  mesh.close();
  assert.equal(identity.closed, true);
});

test('a started identity without a certificate keeps the mesh client unready; close stops the retries', async () => {
  const clock = new FakeClock();
  const mesh = new ClientMesh({
    start: () => Promise.resolve(startedIdentity(false)),
    clock,
    log: memoryLogger(),
  });
  await clock.advance(0);
  assert.equal(mesh.ready(), false);

  let calls = 0;
  const failing = new ClientMesh({
    start: () => {
      calls++;
      return Promise.reject(new Error('down'));
    },
    clock,
    log: memoryLogger(),
  });
  await clock.advance(0);
  failing.close();
  await clock.advance(60_000);
  assert.equal(calls, 1);
  assert.deepEqual(clock.pending(), []);
});
