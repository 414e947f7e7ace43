import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { runCli, startCli, stopCli, waitForOutput } from '../../harness/cli.ts';

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
