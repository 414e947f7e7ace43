import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { test } from 'node:test';
import { runDemo } from '../../../src/cli/demo.ts';

/** The demo's table rows, each ending in its "held" column. */
async function demo(requests: number): Promise<{ ok: boolean; rows: string[] }> {
  const lines: string[] = [];
  const ok = await runDemo({ requests, out: (s) => lines.push(...s.split('\n')) });
  const rows = lines.filter((l) => /^(http:|\(from another pod\))/.test(l));
  assert.equal(rows.length, 5, lines.join('\n'));
  return { ok, rows };
}

test('every claim in the demo table is checked, and held in three runs in a row', async () => {
  for (let run = 1; run <= 3; run++) {
    const { ok, rows } = await demo(40);
    for (const row of rows) assert.match(row, /\byes$/, `run ${run}: ${row}`);
    assert.ok(ok, `run ${run}`);
    const greeter = rows[0] ?? '';
    const fast = Number(/greeter-7d9f-fast x(\d+)/.exec(greeter)?.[1] ?? 0);
    assert.ok(fast > 20, `run ${run}: ${greeter}`);
  }
});

test('a claim that does not hold is reported as such and fails the demo', async (t) => {
  // Something answers where the demo's crashed inventory pod should refuse: nothing is retried.
  const impostor = createServer((_req, res) => {
    res.writeHead(200, { 'x-demo-pod': 'impostor' });
    res.end('{}\n');
  });
  await new Promise<void>((r) => impostor.listen(18080, '127.0.0.14', r));
  t.after(() => {
    impostor.closeAllConnections();
    impostor.close();
  });
  const { ok, rows } = await demo(40);
  assert.match(rows[1] ?? '', /inventory.*\bNO$/);
  assert.equal(ok, false);
});

test('with too few requests to tell, the balanced rows say so instead of claiming', async () => {
  const { ok, rows } = await demo(2);
  assert.match(rows[0] ?? '', /too few requests to tell$/);
  assert.match(rows[1] ?? '', /too few requests to tell$/);
  assert.ok(ok);
});
