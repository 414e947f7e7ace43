import assert from 'node:assert/strict';
import http, { createServer } from 'node:http';
import { test } from 'node:test';
import { runDemo } from '../../../src/cli/demo.ts';
import { runCli, startCli, stopCli, waitForOutput } from '../../harness/cli.ts';

// The demo's pods have the fixed addresses of its manifest (127.0.0.11-14, port 18080): every test
// that runs it lives in this file, so that test files running side by side never share them.

/** One GET through an HTTP proxy the way curl -x sends it (absolute-form target). */
function viaProxy(proxyPort: number, url: string): Promise<{ status: number; pod: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.get(
      { host: '127.0.0.1', port: proxyPort, path: url, headers: { host: u.host }, timeout: 10_000 },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, pod: String(res.headers['x-demo-pod'] ?? '') }),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

test('the demo points at --keep-running with the npx form, never at a bare command off PATH', async () => {
  const r = await runCli(['demo', '--requests', '3']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /npx outrigger demo --keep-running/);
  assert.doesNotMatch(r.stdout, /^try it yourself: outrigger /m);
});

test('demo --keep-running keeps the sidecar and backends up for your own requests until Ctrl-C', async (t) => {
  const demo = startCli(['demo', '--requests', '3', '--keep-running']);
  t.after(() => stopCli(demo, 'SIGKILL'));
  const m = await waitForOutput(demo, /curl -x http:\/\/127\.0\.0\.1:(\d+) http:\/\/greeter\.demo\/hello/);
  const port = Number(m[1]);
  // Well after the table was printed: the backends are still there.
  await new Promise((r) => setTimeout(r, 500));
  const res = await viaProxy(port, 'http://greeter.demo/hello');
  assert.equal(res.status, 200);
  assert.match(res.pod, /^greeter-/);
  assert.equal(await stopCli(demo, 'SIGINT'), 0, demo.err());
});

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
