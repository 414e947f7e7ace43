// The sidecar starts from exactly what the injector gives it: its args, env and volumes,
// materialised the way kubelet would (projected token from the real TokenRequest API, downward-API
// files, emptyDir), against the real API server. Only mount paths and listener ports are remapped
// to this machine; everything else is the injected container spec.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import { injectPod } from '../../src/injector/mutate.ts';
import { applyPatch } from '../../src/injector/patch.ts';
import { injectorSettings } from '../../src/injector/settings.ts';
import type { Container, PodLike } from '../../src/injector/types.ts';
import { startCluster } from '../harness/cluster.ts';
import { rotateSecretDir, writeSecretDir } from '../harness/injector.ts';
import { writeTokenDir } from '../harness/token-dir.ts';
import { repoRoot } from '../harness/tools.ts';

type Mount = { name: string; mountPath: string };
type Probe = { httpGet: { path: string; port: number } };
type SidecarSpec = Container & {
  args: string[];
  volumeMounts: Mount[];
  startupProbe: Probe;
  livenessProbe: Probe;
  env: { name: string; value?: string; valueFrom?: { fieldRef: { fieldPath: string } } }[];
};

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

function get(
  port: number,
  urlPath: string,
  proxyTo?: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: proxyTo ?? urlPath,
        headers: proxyTo ? { host: new URL(proxyTo).host } : {},
        timeout: 5_000,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** kubelet's downward-API file format: key="value" per line, Go-quoted. */
const podInfo = (annotations: Record<string, string>): Record<string, string> => ({
  labels: podInfoFile({ app: 'web' }),
  annotations: podInfoFile(annotations),
});

const podInfoFile = (m: Record<string, string>): string =>
  Object.entries(m)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join('\n');

test('the injected sidecar starts, becomes ready and routes with its own projected token', async (t) => {
  const cluster = await startCluster(t);
  if (!cluster) return;
  t.after(() => cluster.stop());
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'outrigger-injected-'));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const { admin } = cluster;
  const ns = await admin.createNamespace('injected');
  await admin.createServiceAccount(ns, 'app');
  await admin.bindSidecarRole(ns, 'app');
  await admin.apply({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'backend', namespace: ns },
    spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
  });

  const pod: PodLike = {
    metadata: {
      name: 'web-0',
      namespace: ns,
      labels: { app: 'web' },
      annotations: { 'outrigger.dev/log-level': 'debug' },
    },
    spec: {
      serviceAccountName: 'app',
      containers: [{ name: 'app', image: 'x', ports: [{ containerPort: 8080 }] }],
    },
  };
  const result = injectPod(
    pod,
    { name: ns, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
    injectorSettings(loadConfig({ env: {} })),
  );
  assert.equal(result.kind, 'injected');
  if (result.kind !== 'injected') return;
  const injected = applyPatch(pod, result.patch);
  const sidecar = injected.spec.initContainers?.find((c) => c.name === 'outrigger-proxy') as SidecarSpec;
  const volumes = injected.spec.volumes as ({ name: string } & Record<string, unknown>)[];

  // Volumes, as kubelet would fill them.
  const remap = new Map<string, string>();
  for (const m of sidecar.volumeMounts) {
    const dir = path.join(tmp, m.name);
    remap.set(m.mountPath, dir);
    const vol = volumes.find((v) => v.name === m.name);
    if (vol?.projected) {
      const token = await admin.mintToken(ns, 'app', { expirationSeconds: 3600 });
      writeTokenDir(dir, { token, caPem: cluster.caPem, namespace: ns });
    } else if (vol?.downwardAPI) {
      writeSecretDir(dir, podInfo(injected.metadata?.annotations ?? {}));
    } else mkdirSync(dir);
  }
  const fields: Record<string, string> = {
    'metadata.name': 'web-0',
    'metadata.namespace': ns,
    'spec.nodeName': 'node-a',
    'status.podIP': '127.0.0.1',
    'spec.serviceAccountName': 'app',
  };
  const ports = { egress: await freePort(), ingress: await freePort(), admin: await freePort() };
  const api = new URL(cluster.server);
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    KUBERNETES_SERVICE_HOST: api.hostname,
    KUBERNETES_SERVICE_PORT: api.port,
    OUTRIGGER_EGRESS_PORT: String(ports.egress),
    OUTRIGGER_INGRESS_PORT: String(ports.ingress),
    OUTRIGGER_ADMIN_PORT: String(ports.admin),
  };
  for (const e of sidecar.env) {
    let value = e.value ?? fields[e.valueFrom?.fieldRef.fieldPath ?? ''];
    assert.ok(value !== undefined, `env ${e.name} resolves`);
    for (const [from, to] of remap) if (value.startsWith(from)) value = to + value.slice(from.length);
    env[e.name] = value;
  }
  assert.equal(
    sidecar.startupProbe.httpGet.port,
    7402,
    'probes target the default admin port (remapped here)',
  );

  const child = spawn(process.execPath, [path.join(repoRoot, 'src/main.ts'), ...sidecar.args], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.after(() => child.kill('SIGKILL'));

  const started = Date.now();
  let ready = 0;
  for (let i = 0; i < 150 && ready !== 200; i++) {
    ready = await get(ports.admin, sidecar.startupProbe.httpGet.path).then(
      (r) => r.status,
      () => 0,
    );
    if (ready !== 200) await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(ready, 200, `startup probe never passed:\n${stderr.slice(-3000)}`);
  t.diagnostic(`ready ${Date.now() - started} ms after spawn`);
  assert.equal((await get(ports.admin, sidecar.livenessProbe.httpGet.path)).status, 200);

  // Explicit mode: an absolute-form request through the egress listener, as HTTP_PROXY makes apps send.
  const r = await get(ports.egress, '', `http://backend.${ns}/`);
  assert.equal(
    r.status,
    503,
    'a known Service with no endpoints answers 503 (discovery works with the injected token)',
  );
  assert.equal(r.headers['x-outrigger-error'], 'no_endpoints');

  // Live options: kubelet rewrites the downward-API file when annotations change.
  const podInfoDir = env.OUTRIGGER_POD_INFO_DIR ?? '';
  const annotations = injected.metadata?.annotations ?? {};
  rotateSecretDir(
    podInfoDir,
    podInfo({ ...annotations, 'outrigger.dev/log-level': 'debug', 'outrigger.dev/trace-sampling': '0.5' }),
  );
  await until(
    () => /"msg":"live options re-applied".*"logLevel":"debug","traceSampling":0.5/.test(stderr),
    () => stderr,
  );
  rotateSecretDir(podInfoDir, podInfo({ ...annotations, 'outrigger.dev/trace-sampling': 'lots' }));
  await until(
    () => /annotations changed but are invalid.*trace-sampling/.test(stderr),
    () => stderr,
  );

  child.kill('SIGTERM');
  assert.notEqual(await exited, null);
});

/** Bounded wait for a log line (the file watch is asynchronous). */
async function until(cond: () => boolean, log: () => string): Promise<void> {
  for (let i = 0; i < 100 && !cond(); i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(cond(), `not seen in the sidecar's log:\n${log().slice(-2000)}`);
}
