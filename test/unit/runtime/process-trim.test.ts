// The idle trim in a real sidecar process: V8's collector is reachable however node was started,
// and a quiet sidecar trims once after start-up (two quiet 5-s checks), then not again. Its heap
// step, when set, counts its collections beside the trims.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startSidecar, waitForOutput } from '../../harness/cli.ts';
import { httpGet } from '../../harness/http-get.ts';

test('a quiet sidecar trims its memory once after start-up and counts it in /metrics', async (t) => {
  const { admin, proxy } = await startSidecar(t, [
    '--source',
    'file:manifests/demo/cluster.yaml',
    '--namespace',
    'demo',
    '--log-level',
    'debug',
    '--heap-step',
    '1Mi',
  ]);
  const line = await waitForOutput(proxy, /^\{.*"msg":"memory trimmed after a quiet period".*$/m, 40_000);
  const fields = JSON.parse(line[0]) as { residentMB: number; afterMB: number; pauseMs: number };
  assert.ok(fields.afterMB > 0 && fields.residentMB > 0, line[0]);
  const metrics = await httpGet(admin, '/metrics');
  assert.match(metrics.body, /^outrigger_idle_trims 1$/m);
  assert.match(metrics.body, /^outrigger_heap_step_collections \d+$/m);
});
