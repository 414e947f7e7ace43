import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { closedPort, eventually, send, startBackend } from './harness.ts';

const main = new URL('../../../src/main.ts', import.meta.url).pathname;

test('outrigger proxy: serves, re-applies live annotations, drains and exits 0 on SIGTERM', async () => {
  const backend = await startBackend();
  const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-proc-'));
  const [egress, ingress, admin] = [await closedPort(), await closedPort(), await closedPort()];
  writeFileSync(
    path.join(dir, 'cluster.yaml'),
    `apiVersion: v1
kind: Service
metadata: { name: web, namespace: prod }
spec: { ports: [{ name: http, port: 80, protocol: TCP }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-1, namespace: prod, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: http, port: ${backend.port}, protocol: TCP }]
endpoints: [{ addresses: ["127.0.0.1"], conditions: { ready: true } }]
`,
  );
  writeFileSync(path.join(dir, 'annotations'), 'outrigger.dev/log-level="warn"\n');
  const child = spawn(
    process.execPath,
    [
      main,
      'proxy',
      '--source',
      `file:${path.join(dir, 'cluster.yaml')}`,
      '--capture',
      'explicit',
      '--namespace',
      'prod',
    ],
    {
      env: {
        ...process.env,
        OUTRIGGER_EGRESS_PORT: String(egress),
        OUTRIGGER_INGRESS_PORT: String(ingress),
        OUTRIGGER_ADMIN_PORT: String(admin),
        OUTRIGGER_POD_INFO_DIR: dir,
        OUTRIGGER_TRACE_SAMPLING: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let logs = '';
  child.stderr.on('data', (d: Buffer) => (logs += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  try {
    await eventually(
      'ready',
      async () => (await send(admin, { path: '/readyz' }).catch(() => ({ status: 0 }))).status === 200,
    );
    assert.equal((await send(egress, { headers: { host: 'web.prod' } })).status, 200);
    assert.doesNotMatch(logs, /outrigger proxy started/, 'info is below the annotated warn level');
    writeFileSync(
      path.join(dir, 'annotations'),
      'outrigger.dev/log-level="info"\noutrigger.dev/trace-sampling="0.5"\n',
    );
    await eventually('live options re-applied', () => logs.includes('live options re-applied'));
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    assert.match(logs, /shutting down/);
  } finally {
    child.kill('SIGKILL');
    await backend.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
