// The whole wiring, as a pod runs it: two `outrigger proxy` processes (explicit capture, file
// source) whose pod metadata comes from the downward API (env + labels/annotations files), a real
// Jaeger, live re-application of the sampling annotation, and the flush on SIGTERM.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { freePort, startJaeger, type JaegerSpan } from '../harness/jaeger.ts';
import { serviceYaml, startEchoBackend } from '../harness/tracing-relay.ts';
import { repoRoot } from '../harness/tools.ts';

interface Proxy {
  egress: number;
  ingress: number;
  admin: number;
  podInfo: string;
  logs: string[];
  child: ChildProcess;
}

function annotations(values: Record<string, string>): string {
  return Object.entries(values)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}\n`)
    .join('');
}

async function startProxy(
  dir: string,
  name: string,
  opts: {
    source: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    appPort?: number;
  },
): Promise<Proxy> {
  const podInfo = path.join(dir, `${name}-podinfo`);
  mkdirSync(podInfo);
  writeFileSync(path.join(podInfo, 'labels'), annotations(opts.labels));
  writeFileSync(path.join(podInfo, 'annotations'), annotations(opts.annotations));
  const [egress, ingress, admin] = [await freePort(), await freePort(), await freePort()];
  const args = [
    path.join(repoRoot, 'src/main.ts'),
    'proxy',
    ...['--source', `file:${opts.source}`, '--namespace', 'shop', '--pod-info-dir', podInfo],
    ...['--egress-port', String(egress), '--ingress-port', String(ingress), '--admin-port', String(admin)],
    ...['--drain-duration', '0s', '--log-level', 'info'],
    ...(opts.appPort ? ['--app-port', String(opts.appPort)] : []),
  ];
  const child = spawn(process.execPath, args, {
    env: {
      PATH: process.env.PATH,
      OUTRIGGER_POD_NAME: `${name}-7d9f8b6c4d-x2x7q`,
      OUTRIGGER_POD_NAMESPACE: 'shop',
      OUTRIGGER_NODE_NAME: `node-${name}`,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const logs: string[] = [];
  createInterface({ input: child.stderr }).on('line', (l) => logs.push(l));
  const proxy = { egress, ingress, admin, podInfo, logs, child };
  await until(
    `${name} ready`,
    async () => (await status(admin, '/readyz')) === 200,
    () => logs.join('\n'),
  );
  return proxy;
}

function status(port: number, p: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, timeout: 1_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

async function until(
  what: string,
  check: () => Promise<boolean> | boolean,
  detail = () => '',
): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${detail()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The app's request, through HTTP_PROXY (absolute-form) to the egress listener. */
function get(egressPort: number, traceparent: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: '127.0.0.1', port: egressPort, path: 'http://catalog.shop/items', headers: { traceparent } },
      (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
  });
}

async function stop(p: Proxy): Promise<void> {
  if (p.child.exitCode !== null) return;
  const exited = new Promise((r) => p.child.once('exit', r));
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

const traceparent = (traceId: string) => `00-${traceId}-00f067aa0ba902b7-01`;
const byService = (spans: JaegerSpan[], s: string) => spans.find((x) => x.service === s);

test('outrigger proxy: downward-API resource, live sampling annotation, flush on SIGTERM', async (t) => {
  const jaeger = await startJaeger(t);
  if (!jaeger) return;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-tracing-proc-'));
  const backend = await startEchoBackend();
  const proxies: Proxy[] = [];
  t.after(async () => {
    await Promise.all(proxies.map(stop));
    await backend.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const base = {
    'outrigger.dev/capture': 'explicit',
    'outrigger.dev/trace-collector': jaeger.otlpUrl,
    'outrigger.dev/trace-sampling': '0',
  };
  const source = path.join(dir, 'services.yaml');
  writeFileSync(source, '');
  const catalog = await startProxy(dir, 'catalog', {
    source,
    labels: { app: 'catalog' },
    annotations: { ...base, 'outrigger.dev/service-name': 'catalog-api' },
    appPort: backend.port,
  });
  proxies.push(catalog);
  writeFileSync(source, serviceYaml('catalog', 'shop', catalog.ingress, '10.96.0.77'));
  const web = await startProxy(dir, 'web', {
    source,
    labels: { 'app.kubernetes.io/name': 'web' },
    annotations: base,
  });
  proxies.push(web);

  // Sampling 0: a sampled request from the app produces no span anywhere.
  const silent = '11111111111111111111111111111111';
  assert.equal(await get(web.egress, traceparent(silent)), 200);

  // The sampling annotation changes: both sidecars re-apply it without a restart.
  for (const p of [web, catalog]) {
    const extra: Record<string, string> =
      p === catalog ? { 'outrigger.dev/service-name': 'catalog-api' } : {};
    writeFileSync(
      path.join(p.podInfo, 'annotations'),
      annotations({ ...base, ...extra, 'outrigger.dev/trace-sampling': '1' }),
    );
  }
  for (const p of [web, catalog]) {
    await until(
      'live sampling',
      () => p.logs.some((l) => l.includes('trace sampling changed')),
      () => p.logs.join('\n'),
    );
  }
  const traced = '22222222222222222222222222222222';
  assert.equal(await get(web.egress, traceparent(traced)), 200);
  const spans = await jaeger.waitForTrace(traced, 2);
  const client = byService(spans, 'web');
  const server = byService(spans, 'catalog-api');
  assert.ok(client && server, JSON.stringify(spans));
  assert.equal(server.parentSpanId, client.spanId);
  assert.equal(client.resource['k8s.pod.name'], 'web-7d9f8b6c4d-x2x7q');
  assert.equal(client.resource['k8s.namespace.name'], 'shop');
  assert.equal(client.resource['k8s.node.name'], 'node-web');
  assert.equal(server.resource['k8s.node.name'], 'node-catalog');
  // Anything the first request had produced would have been exported before the second's spans.
  assert.deepEqual(await jaeger.trace(silent), [], 'sampling 0 produced no span');

  // SIGTERM right after a request: the spans still in the batch queue are flushed on the way out.
  const last = '33333333333333333333333333333333';
  assert.equal(await get(web.egress, traceparent(last)), 200);
  await Promise.all([stop(web), stop(catalog)]);
  assert.equal((await jaeger.waitForTrace(last, 2, 5_000)).length, 2);
});
