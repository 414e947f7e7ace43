// The container image, without a container engine: the Dockerfile's runtime stage is `dist/` from
// `node scripts/bundle.ts` (src/ bundled), the production dependencies only (`npm ci --omit=dev`),
// package.json, proto/, manifests/ and bin/, started as
// `node --max-semi-space-size=4 /app/dist/main.js`. This test lays out the same tree from the
// installed packages (npm's own list of the production tree, no network) and checks that every
// role starts from it, that a sidecar routes a request, that one starts from its snapshot (the
// schema in proto/ resolves) while the API is unreachable, that nothing is written into the tree (read-only root filesystem), and that no test-only code (fakes)
// ships. The built image itself is tested by test/image/ (scripts/build-image --test).
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import { closedKubeconfig } from '../harness/cli.ts';
import { waitFor } from '../harness/discovery.ts';
import { httpGet as get } from '../harness/http-get.ts';
import { transformSync } from 'esbuild';
import { bundle } from '../../scripts/bundle.ts';
import { encodeSnapshot } from '../../src/discovery/snapshot.ts';
import type { ServiceInfo } from '../../src/discovery/types.ts';

const repo = path.resolve(import.meta.dirname, '../..');
const root = mkdtempSync(path.join(os.tmpdir(), 'outrigger-image-'));
const app = path.join(root, 'app');
const main = path.join(app, 'dist/main.js');
const ENTRY_FLAGS = ['--max-semi-space-size=4'];
/** The files the bundle was made of, as paths from the repository root. */
let bundled = new Set<string>();

/** Every file under dir with its size and mtime, to prove nothing was written. */
function listing(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((f) => {
      const s = statSync(path.join(dir, f));
      return `${f} ${s.size} ${s.mtimeMs}`;
    })
    .sort();
}

function run(args: string[]): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [...ENTRY_FLAGS, main, ...args], {
    encoding: 'utf8',
    cwd: root,
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' },
    timeout: 30_000,
  });
  return { status: r.status, out: r.stdout + r.stderr };
}

before(async () => {
  bundled = new Set(Object.keys((await bundle(path.join(app, 'dist'))).inputs));
  // The production tree as npm resolved it: each package directory without its nested
  // node_modules (those are listed, and copied, on their own).
  const list = spawnSync('npm', ['ls', '--omit=dev', '--all', '--parseable'], {
    cwd: repo,
    encoding: 'utf8',
  });
  const dirs = list.stdout
    .split('\n')
    .filter((d) => d.startsWith(path.join(repo, 'node_modules') + path.sep));
  assert.ok(dirs.length > 20, `npm ls --omit=dev listed the production tree: ${list.stderr}`);
  for (const dir of dirs) {
    cpSync(dir, path.join(app, path.relative(repo, dir)), {
      recursive: true,
      filter: (src) => src === dir || path.relative(dir, src).split(path.sep)[0] !== 'node_modules',
    });
  }
  for (const f of ['package.json', 'proto', 'manifests', 'bin'])
    cpSync(path.join(repo, f), path.join(app, f), { recursive: true });
});

after(() => rmSync(root, { recursive: true, force: true }));

test('the runtime tree holds no development dependency', () => {
  const modules = readdirSync(path.join(app, 'node_modules'));
  for (const dev of ['typescript', 'node', 'eslint', 'prettier']) assert.ok(!modules.includes(dev), dev);
  assert.ok(modules.includes('http-proxy'));
});

test('no test-only code ships: no fake, and every module in src/ is in the bundle', () => {
  const dist = path.join(app, 'dist');
  const fakes = readdirSync(dist)
    .filter((f) => f.endsWith('.js'))
    .filter((f) => /fake/i.test(f) || /\bclass Fake/.test(readFileSync(path.join(dist, f), 'utf8')));
  assert.deepEqual(fakes, [], 'fakes belong under test/');
  // A module of types only compiles to nothing, and nothing loads it at run time.
  const typesOnly = (f: string): boolean =>
    transformSync(readFileSync(path.join(repo, f), 'utf8'), { loader: 'ts', format: 'esm' }).code.trim() ===
    '';
  const modules = readdirSync(path.join(repo, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.posix.join('src', f.split(path.sep).join('/')));
  const unreached = modules.filter((f) => !bundled.has(f) && !typesOnly(f));
  assert.deepEqual(unreached, [], 'modules no command loads are test-only: move them under test/');
  assert.ok(bundled.size > 100, `the bundle's inputs were read (${bundled.size})`);
});

test('every role starts from the runtime tree: proxy, webhook, gateway, the iptables init step, inject, install', () => {
  for (const cmd of [
    ['--help'],
    ['proxy', '--help'],
    ['webhook', '--help'],
    ['gateway', '--help'],
    ['iptables', '--help'],
  ]) {
    const r = run(cmd);
    assert.equal(r.status, 0, `${cmd.join(' ')}: ${r.out}`);
  }
  const rules = run(['iptables', '--dry-run']);
  assert.equal(rules.status, 0, rules.out);
  assert.match(rules.out, /REDIRECT/);
  const manifest = path.join(root, 'pod.yaml');
  writeFileSync(
    manifest,
    'apiVersion: v1\nkind: Pod\nmetadata: { name: p, namespace: d }\nspec: { containers: [{ name: a, image: x }] }\n',
  );
  const injected = run(['inject', '-f', manifest]);
  assert.equal(injected.status, 0, injected.out);
  assert.match(injected.out, /outrigger/);
  // install prints the control plane from manifests/, which the image therefore carries.
  const install = run(['install', '--image', 'registry.example/outrigger:1', '--namespaces', 'shop']);
  assert.equal(install.status, 0, install.out);
  assert.match(install.out, /kind: MutatingWebhookConfiguration/);
});

test('a sidecar from the runtime tree routes a request and writes nothing into the tree', async (t) => {
  const port = await backend(t, 'from the backend');
  const source = path.join(root, 'services.yaml');
  writeFileSync(
    source,
    `apiVersion: v1
kind: Service
metadata: { name: web, namespace: demo }
spec: { clusterIP: 10.96.0.9, ports: [{ name: http, port: 80, protocol: TCP, targetPort: ${port} }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-1, namespace: demo, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: http, port: ${port}, protocol: TCP }]
endpoints: [{ addresses: ["127.0.0.1"], conditions: { ready: true } }]
`,
  );
  const before = listing(app);
  const { egress, child } = await sidecar(t, ['--source', `file:${source}`]);
  const r = await get(egress, '/', 'web.demo');
  assert.equal(r.status, 200);
  assert.equal(r.body, 'from the backend');
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  assert.deepEqual(listing(app), before, 'the image tree is unchanged (read-only root filesystem)');
});

test('a sidecar from the runtime tree starts from its snapshot while the API is unreachable', async (t) => {
  const port = await backend(t, 'from the snapshot');
  const key = { namespace: 'demo', name: 'kept' };
  const endpoint = { address: '127.0.0.1', port, ready: true, serving: true, terminating: false };
  const info: ServiceInfo = {
    key,
    type: 'ClusterIP',
    headless: false,
    clusterIPs: ['10.96.0.10'],
    ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: port }],
    sessionAffinity: 'None',
    affinityTimeoutSeconds: 0,
    internalTrafficPolicy: 'Cluster',
    endpoints: new Map([['http', [endpoint]]]),
  };
  const snapshot = path.join(root, 'snapshot.pb');
  writeFileSync(
    snapshot,
    encodeSnapshot({
      writtenAt: Date.now(),
      services: [{ info }],
      index: [{ key, clusterIPs: info.clusterIPs }],
    }),
  );
  const kubeconfig = closedKubeconfig(root);
  const { egress } = await sidecar(t, ['--kubeconfig', kubeconfig, '--snapshot', snapshot]);
  const r = await get(egress, '/', 'kept.demo');
  assert.equal(r.status, 200);
  assert.equal(r.body, 'from the snapshot');
});

async function backend(t: TestContext, body: string): Promise<number> {
  const server = http.createServer((_req, res) => res.end(body));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  return (server.address() as AddressInfo).port;
}

/** `outrigger proxy` from the tree, explicit capture, namespace demo, no tracing; ready. */
async function sidecar(t: TestContext, source: string[]): Promise<{ egress: number; child: ChildProcess }> {
  const [egress, ingress, admin] = (await freePorts(3)) as [number, number, number];
  const ports = [
    '--egress-port',
    String(egress),
    '--ingress-port',
    String(ingress),
    '--admin-port',
    String(admin),
  ];
  const child = spawn(
    process.execPath,
    [
      ...ENTRY_FLAGS,
      main,
      'proxy',
      ...source,
      '--capture',
      'explicit',
      '--namespace',
      'demo',
      ...ports,
      '--trace-sampling',
      '0',
    ],
    { cwd: root, env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' }, stdio: 'ignore' },
  );
  t.after(() => child.kill('SIGKILL'));
  await waitFor('/readyz', async () => (await get(admin, '/readyz')).status === 200, 20_000);
  return { egress, child };
}

async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, () => {
      const s = http.createServer();
      return new Promise<http.Server>((r) => s.listen(0, '127.0.0.1', () => r(s)));
    }),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}
