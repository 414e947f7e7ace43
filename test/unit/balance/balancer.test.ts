import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../../harness/fake-clock.ts';
import { ServiceBalancer, type BalancerOptions } from '../../../src/balance/balancer.ts';

/** Deterministic randomness: cycles through the given values. */
const seq = (...values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length] as number;
};

function make(o: Partial<BalancerOptions> = {}) {
  const clock = new FakeClock();
  const ejected: string[] = [];
  const b = new ServiceBalancer('prod/web', {
    algorithm: 'p2c-ewma',
    clock,
    random: seq(0, 0.99),
    onEject: (_s, id) => ejected.push(id),
    ...o,
  });
  return { b, clock, ejected };
}

async function serve(b: ServiceBalancer, clock: FakeClock, id: string, ms: number): Promise<void> {
  const done = b.start(id);
  await clock.advance(ms);
  done('success');
}

test('P2C over peak-EWMA prefers the faster of the two sampled endpoints', async () => {
  const { b, clock } = make();
  await serve(b, clock, 'slow', 200);
  await serve(b, clock, 'fast', 5);
  // random() yields 0 then 0.99: the pair is (ids[0], ids[1]) both ways round.
  assert.equal(b.pick(['slow', 'fast']), 'fast');
  assert.equal(b.pick(['fast', 'slow']), 'fast');
});

test('pending requests raise an endpoint cost', async () => {
  const { b, clock } = make();
  await serve(b, clock, 'a', 10);
  await serve(b, clock, 'b', 12);
  const inflight = [b.start('a'), b.start('a'), b.start('a')];
  assert.equal(b.pick(['a', 'b']), 'b');
  for (const d of inflight) d('cancelled');
  assert.equal(b.pick(['a', 'b']), 'a');
});

test('a peak is taken at once and decays back while idle', async () => {
  const { b, clock } = make({ decayMs: 1_000 });
  await serve(b, clock, 'a', 1_000);
  const peak = b.view().find((v) => v.id === 'a')?.ewmaMs ?? 0;
  assert.equal(peak, 1_000);
  await clock.advance(5_000);
  const later = b.view().find((v) => v.id === 'a')?.ewmaMs ?? Infinity;
  assert.ok(later < 10, `decayed to ${later}`);
});

test('round robin cycles in order and skips excluded endpoints', () => {
  const { b } = make({ algorithm: 'round-robin' });
  const ids = ['a', 'b', 'c'];
  assert.deepEqual([b.pick(ids), b.pick(ids), b.pick(ids), b.pick(ids)], ['a', 'b', 'c', 'a']);
  assert.equal(b.pick(ids, new Set(['a', 'b', 'c'])), undefined);
  assert.equal(b.pick(ids, new Set(['a', 'c'])), 'b');
});

test('consecutive failures eject an endpoint; it returns after the ejection time', async () => {
  const { b, clock, ejected } = make({
    algorithm: 'round-robin',
    outlier: { consecutiveFailures: 3, baseEjectionMs: 10_000, maxEjectionMs: 60_000 },
  });
  for (let i = 0; i < 2; i++) b.start('bad')('connect_failure');
  assert.equal(b.isEjected('bad'), false);
  b.start('bad')('server_error');
  assert.deepEqual(ejected, ['bad']);
  const ids = ['bad', 'g1', 'g2'];
  for (let i = 0; i < 6; i++) assert.notEqual(b.pick(ids), 'bad');
  await clock.advance(10_000);
  assert.equal(b.isEjected('bad'), false);
  // Probation: a single failure ejects again, for twice as long.
  b.start('bad')('connect_failure');
  assert.deepEqual(ejected, ['bad', 'bad']);
  await clock.advance(10_000);
  assert.equal(b.isEjected('bad'), true);
  await clock.advance(10_000);
  assert.equal(b.isEjected('bad'), false);
});

test('a success clears the failure streak', () => {
  const { b, ejected } = make({
    outlier: { consecutiveFailures: 3, baseEjectionMs: 1_000, maxEjectionMs: 1_000 },
  });
  b.start('a')('connect_failure');
  b.start('a')('connect_failure');
  b.start('a')('success');
  b.start('a')('connect_failure');
  b.start('a')('connect_failure');
  assert.deepEqual(ejected, []);
});

test('panic threshold: ejection never leaves a Service with nothing to pick', () => {
  const { b } = make({
    algorithm: 'round-robin',
    outlier: { consecutiveFailures: 1, baseEjectionMs: 60_000, maxEjectionMs: 60_000 },
  });
  b.start('a')('connect_failure');
  b.start('b')('connect_failure');
  assert.equal(b.allEjected(['a', 'b']), true);
  assert.ok(['a', 'b'].includes(b.pick(['a', 'b']) ?? ''));
  // One of three ejected is above the 50 % threshold: the ejected one is skipped.
  const picks = new Set([0, 1, 2, 3].map(() => b.pick(['a', 'c', 'd'])));
  assert.equal(picks.has('a'), false);
  // Two of three ejected: panic, balance across all.
  const panicPicks = new Set([0, 1, 2, 3, 4, 5].map(() => b.pick(['a', 'b', 'c'])));
  assert.equal(panicPicks.size, 3);
});

test('timeouts and cancellations do not eject; failures count as slow', async () => {
  const { b, clock, ejected } = make({
    outlier: { consecutiveFailures: 1, baseEjectionMs: 1, maxEjectionMs: 1 },
  });
  b.start('a')('timeout');
  b.start('a')('cancelled');
  assert.deepEqual(ejected, []);
  await serve(b, clock, 'b', 50);
  assert.equal(b.pick(['a', 'b']), 'b');
});

test('retain forgets endpoints that left the Service', () => {
  const { b } = make();
  b.start('a')('success');
  b.start('b')('success');
  b.retain(['b']);
  assert.deepEqual(
    b.view().map((v) => v.id),
    ['b'],
  );
});

test('P2C spreads one-at-a-time calls evenly over endpoints of equal latency', async () => {
  for (const seed of [1, 7, 42, 99, 1234]) {
    // A seeded generator: the same picks and latencies on every run.
    let s = seed;
    const random = () => (s = (s * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const { b, clock } = make({ random });
    const calls = new Map<string, number>([
      ['a', 0],
      ['b', 0],
      ['c', 0],
    ]);
    for (let i = 0; i < 300; i++) {
      const id = b.pick([...calls.keys()]) as string;
      calls.set(id, (calls.get(id) ?? 0) + 1);
      await serve(b, clock, id, 1 + random() * 0.5);
    }
    // Each endpoint within a third of the calls, ± 10 points.
    const counts = [...calls.values()];
    assert.ok(
      counts.every((n) => n >= 69 && n <= 129),
      `seed ${seed}: ${counts.join('/')}`,
    );
  }
});
