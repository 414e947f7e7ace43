// The container image, without a container engine: the Dockerfile's runtime stage is `dist/` from
// `tsc -p tsconfig.build.json`, the production dependencies only (`npm ci --omit=dev`),
// package.json, proto/, manifests/ and bin/, started as
// `node --max-semi-space-size=4 /app/dist/main.js`. This test lays out the same tree from the
// installed packages (npm's own list of the production tree, no network) and checks that every
// role starts from it, that a sidecar routes a request, that the snapshot schema resolves, that
// nothing is written into the tree (read-only root filesystem), and that no test-only code (fakes)
// ships. The built image itself is tested by test/image/ (scripts/build-image --test).
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { waitFor } from '../harness/discovery.ts';
import { httpGet as get } from '../harness/http-get.ts';

const repo = path.resolve(import.meta.dirname, '../..');
const root = mkdtempSync(path.join(os.tmpdir(), 'outrigger-image-'));
const app = path.join(root, 'app');
const main = path.join(app, 'dist/main.js');
const ENTRY_FLAGS = ['--max-semi-space-size=4'];

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

before(() => {
  execFileSync(
    process.execPath,
    [
      path.join(repo, 'node_modules/typescript/bin/tsc'),
      '-p',
      'tsconfig.build.json',
      '--outDir',
      path.join(app, 'dist'),
    ],
    { cwd: repo, stdio: 'pipe', timeout: 300_000 },
  );
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

/** Relative modules a compiled module imports, statically or on use (`import(...)`). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g)];
  // A module required synchronously on first use names itself by path with the running file's
  // extension (./x.ts in the sources, ./x.js once compiled): new URL(`./x${extname(...)}`, ...).
  const byPath = [...text.matchAll(/new URL\(`(\.{1,2}\/[^`$]+)\$\{extname\(import\.meta\.url\)\}`/g)];
  return [
    ...specifiers.map((m) => path.resolve(path.dirname(file), m[1] as string)),
    ...byPath.map((m) => path.resolve(path.dirname(file), `${m[1] as string}.js`)),
  ];
}

test('no test-only code ships: no fake, and every module in dist/ is reachable from main.js', () => {
  const dist = path.join(app, 'dist');
  const modules = readdirSync(dist, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.js'))
    .map((f) => path.join(dist, f));
  const fakes = modules.filter(
    (f) => /fake/i.test(path.basename(f)) || /\bclass Fake/.test(readFileSync(f, 'utf8')),
  );
  assert.deepEqual(
    fakes.map((f) => path.relative(dist, f)),
    [],
    'fakes belong under test/',
  );
  const reached = new Set<string>();
  const queue = [main];
  for (let f = queue.pop(); f !== undefined; f = queue.pop()) {
    if (reached.has(f)) continue;
    reached.add(f);
    queue.push(...importsOf(f).filter((m) => m.startsWith(dist + path.sep)));
  }
  // A module of types only compiles to an empty one that nothing loads at run time.
  const typesOnly = (f: string): boolean =>
    readFileSync(f, 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '')
      .trim() === 'export {};';
  const unreached = modules
    .filter((f) => !reached.has(f) && !typesOnly(f))
    .map((f) => path.relative(dist, f));
  assert.deepEqual(unreached, [], 'modules no command loads are test-only: move them under test/');
  assert.ok(reached.size > 50, `the import walk found the modules (${reached.size})`);
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
  const backend = http.createServer((_req, res) => res.end('from the backend'));
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  t.after(() => backend.close());
  const port = (backend.address() as AddressInfo).port;
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
  const ports = await freePorts(3);
  const [egress, ingress, admin] = ports as [number, number, number];
  const child = spawn(
    process.execPath,
    [
      ...ENTRY_FLAGS,
      main,
      'proxy',
      '--source',
      `file:${source}`,
      '--capture',
      'explicit',
      '--namespace',
      'demo',
      ...['--egress-port', String(egress), '--ingress-port', String(ingress), '--admin-port', String(admin)],
      '--trace-sampling',
      '0',
    ],
    { cwd: root, env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' }, stdio: 'ignore' },
  );
  t.after(() => child.kill('SIGKILL'));
  await waitFor('/readyz', async () => (await get(admin, '/readyz')).status === 200, 20_000);
  const r = await get(egress, '/', 'web.demo');
  assert.equal(r.status, 200);
  assert.equal(r.body, 'from the backend');
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  assert.deepEqual(listing(app), before, 'the image tree is unchanged (read-only root filesystem)');
});

test('the snapshot schema (proto/) resolves from dist/', async () => {
  const snapshot = (await import(path.join(app, 'dist/discovery/snapshot.js'))) as {
    encodeSnapshot(d: unknown): Buffer;
    decodeSnapshot(b: Buffer): { writtenAt: number };
  };
  const bytes = snapshot.encodeSnapshot({ writtenAt: 42, services: [], index: [] });
  assert.equal(snapshot.decodeSnapshot(bytes).writtenAt, 42);
});

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
