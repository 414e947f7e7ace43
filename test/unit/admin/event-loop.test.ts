import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { registerEventLoopDelay } from '../../../src/admin/event-loop.ts';

const max = (text: string): number =>
  Number(/^outrigger_event_loop_delay_seconds\{quantile="1"\} (\S+)$/m.exec(text)?.[1]);

test('a blocked event loop shows in outrigger_event_loop_delay_seconds, which restarts at each scrape', async () => {
  const registry = new Registry();
  registerEventLoopDelay(registry);
  await sleep(30);
  const until = performance.now() + 80;
  while (performance.now() < until); // a synchronous stall, as a long GC pause would be
  await sleep(30); // the sampling timer fires (late) and records the stall
  const first = await registry.metrics();
  assert.match(first, /# TYPE outrigger_event_loop_delay_seconds gauge/);
  assert.ok(max(first) >= 0.06, `the 80 ms stall is seen: ${first}`);
  for (const q of ['0.5', '0.99']) assert.match(first, new RegExp(`quantile="${q}"`));
  const second = await registry.metrics();
  assert.ok(max(second) < max(first), 'the window restarts at each scrape');
});
