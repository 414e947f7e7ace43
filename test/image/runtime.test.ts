// The built container image, run by podman the way a pod runs it: as UID 2102 with a read-only
// root filesystem and no network but loopback (the init step as root with only NET_ADMIN and
// NET_RAW). Not part of `npm test`: it needs the image archive, which `scripts/build-image --test`
// builds and then runs this file against. Without podman or the archive the tests skip locally and
// fail under CI=true.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { repoRoot, requireTool } from '../harness/tools.ts';

const archive = process.env.OUTRIGGER_IMAGE_ARCHIVE ?? path.join(repoRoot, '.outrigger/images/outrigger.tar');
const version = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string })
  .version;
// Fixed limits: podman's defaults (1048576 open files) fail on hosts that cap the hard limit.
const ulimits = (process.env.OUTRIGGER_PODMAN_ULIMITS || 'nofile=1024:20000 nproc=4096:4096')
  .split(/\s+/)
  .filter(Boolean)
  .flatMap((l) => ['--ulimit', l]);
// As a pod runs it: nothing writable (podman's --read-only would add tmpfs mounts), loopback only.
const POD = ['--rm', '--network', 'none', '--read-only', '--read-only-tmpfs=false', ...ulimits];
const INIT = ['--user', '0:0', '--cap-drop', 'ALL', '--cap-add', 'NET_ADMIN', '--cap-add', 'NET_RAW'];
// The injected init container mounts an emptyDir on /run for iptables' lock.
const RUN_VOLUME = ['--tmpfs', '/run'];
const SIZE_CEILING_MB = 200;

const podmanInstalled = spawnSync('podman', ['--version'], { stdio: 'ignore' }).status === 0;

/**
 * crun refuses hosts with cgroup v1 plus a controller on cgroup2 ("hybrid"); runc runs there.
 * scripts/build-image makes the same choice and passes it on.
 */
function runtime(): string[] {
  const chosen = process.env.OUTRIGGER_PODMAN_RUNTIME;
  if (chosen !== undefined) return chosen ? ['--runtime', chosen] : [];
  const controllers = '/sys/fs/cgroup/unified/cgroup.controllers';
  const hybrid = existsSync(controllers) && readFileSync(controllers, 'utf8').trim() !== '';
  const info = spawnSync('podman', ['info', '--format', '{{.Host.OCIRuntime.Name}}'], { encoding: 'utf8' });
  return hybrid && info.stdout.trim() === 'crun' ? ['--runtime', 'runc'] : [];
}

let podmanArgs: string[] | undefined;
let imageId: string | undefined;

function podman(args: string[]): { status: number | null; out: string; err: string } {
  podmanArgs ??= runtime();
  const r = spawnSync('podman', [...podmanArgs, ...args], { encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, out: r.stdout ?? '', err: `${r.stderr ?? ''}${r.error?.message ?? ''}` };
}

/** The archive, loaded into podman's store once; undefined when the test was skipped. */
function image(t: TestContext): string | undefined {
  if (!requireTool(t, podmanInstalled, 'podman', 'apt-get install -y podman')) return undefined;
  if (!requireTool(t, existsSync(archive), `the image archive ${archive}`, 'build it: scripts/build-image'))
    return undefined;
  if (imageId) return imageId;
  const loaded = podman(['load', '-i', archive]);
  assert.equal(loaded.status, 0, `podman load -i ${archive}: ${loaded.err}`);
  // "Loaded image: NAME" (docker-archive) or "Loaded image: sha256:ID" (oci-archive without a name).
  const name = /Loaded image\(?s?\)?:\s*(\S+)/.exec(loaded.out)?.[1];
  assert.ok(name, `podman load named the image: ${loaded.out}`);
  const id = podman(['image', 'inspect', '--format', '{{.Id}}', name]).out.trim();
  assert.match(id, /^[0-9a-f]{64}$/);
  imageId = id;
  return id;
}

function run(id: string, args: string[], opts: string[] = []): { status: number | null; out: string } {
  const r = podman(['run', ...POD, ...opts, id, ...args]);
  return { status: r.status, out: r.out + r.err };
}

/** Runs a module script with the image's node instead of the ENTRYPOINT. */
function node(id: string, script: string, opts: string[] = []): { status: number | null; out: string } {
  return run(id, ['--input-type=module', '-e', script], ['--entrypoint', 'node', ...opts]);
}

test('the image is three layers FROM scratch, runs as 2102:2102 and stays under 200 MB', (t) => {
  const id = image(t);
  if (!id) return;
  const inspect = JSON.parse(podman(['image', 'inspect', id]).out) as {
    Size: number;
    RootFS: { Layers: string[] };
    Config: { User: string; Entrypoint: string[]; Cmd: string[]; Env: string[] };
  }[];
  const img = inspect[0];
  assert.ok(img);
  assert.equal(img.Config.User, '2102:2102');
  assert.deepEqual(img.Config.Entrypoint, ['node', '--max-semi-space-size=4', '/app/dist/main.js']);
  assert.deepEqual(img.Config.Cmd, ['proxy']);
  assert.ok(img.Config.Env.includes('NODE_ENV=production'), img.Config.Env.join(' '));
  assert.equal(img.RootFS.Layers.length, 3, 'system, dependencies, application');
  const mb = img.Size / 1e6;
  assert.ok(mb < SIZE_CEILING_MB, `${mb.toFixed(1)} MB: every pod pulls it; see docs/injection.md, "Image"`);
});

test('only what runs ships: no shell, no package manager, no dev dependency, all files root-owned', (t) => {
  const id = image(t);
  if (!id) return;
  const created = podman(['create', id]);
  assert.equal(created.status, 0, created.err);
  const container = created.out.trim();
  t.after(() => podman(['rm', '--force', container]));
  // The files a container of the image sees; `tar -tv` lines are "mode owner/group size date time path".
  const exported = `set -o pipefail; podman ${podmanArgs?.join(' ') ?? ''} export ${container} | tar --numeric-owner -tvf -`;
  const listing = execFileSync('bash', ['-c', exported], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const f = l.split(/\s+/);
      return {
        owner: f[1] ?? '',
        path: f
          .slice(5)
          .join(' ')
          .replace(/ -> .*$/, '')
          .replace(/\/$/, ''),
      };
    });
  const paths = new Set(listing.map((e) => e.path));
  for (const p of [
    'usr/local/bin/node',
    'usr/sbin/xtables-nft-multi',
    'usr/sbin/xtables-legacy-multi',
    'usr/sbin/iptables-restore',
    'usr/sbin/ip6tables-legacy-save',
    'etc/ssl/certs/ca-certificates.crt',
    'app/dist/main.js',
    'app/proto/outrigger/v1/snapshot.proto',
    'app/manifests/demo/cluster.yaml',
    'app/node_modules/koffi/package.json',
  ])
    assert.ok(paths.has(p), `${p} ships`);
  for (const p of [
    'usr/bin/sh',
    'usr/bin/bash',
    'usr/bin/dash',
    'usr/bin/apt-get',
    'usr/bin/dpkg',
    'usr/local/bin/npm',
    'usr/local/lib/node_modules/npm',
    'app/node_modules/typescript',
    'app/node_modules/eslint',
    'app/node_modules/node',
  ])
    assert.ok(!paths.has(p), `${p} must not ship`);
  const declarations = [...paths].filter((p) => p.startsWith('app/node_modules/') && /\.d\.[mc]?ts$/.test(p));
  assert.deepEqual(declarations, [], 'type declarations are pruned from the dependencies');
  const notRoot = listing.filter((e) => e.owner !== '0/0').map((e) => `${e.owner} ${e.path}`);
  assert.deepEqual(notRoot, [], 'the sidecar user owns nothing in the image');
});

test('--help and version run as the sidecar user, read-only, with loopback only', (t) => {
  const id = image(t);
  if (!id) return;
  const help = run(id, ['--help']);
  assert.equal(help.status, 0, help.out);
  assert.match(help.out, /Usage: outrigger/);
  const v = run(id, ['version']);
  assert.equal(v.status, 0, v.out);
  assert.match(v.out, new RegExp(`outrigger ${version.replaceAll('.', '\\.')} \\(Node\\.js v24\\.`));
  for (const cmd of [
    ['proxy', '--help'],
    ['webhook', '--help'],
    ['gateway', '--help'],
    ['iptables', '--dry-run'],
  ]) {
    const r = run(id, cmd);
    assert.equal(r.status, 0, `${cmd.join(' ')}: ${r.out}`);
  }
  // install prints the control plane from manifests/ in the image.
  const install = run(id, ['install', '--image', 'registry.example/outrigger:1', '--namespaces', 'shop']);
  assert.equal(install.status, 0, install.out);
  assert.match(install.out, /kind: MutatingWebhookConfiguration/);
});

test('the sidecar user can write nothing: read-only root, and root-owned files without it', (t) => {
  const id = image(t);
  if (!id) return;
  const probe = `import fs from 'node:fs'; import os from 'node:os';
    const tries = {};
    for (const p of ['/app/dist/main.js', '/app/new', '/tmp/new', '/new'])
      try { fs.appendFileSync(p, ''); tries[p] = 'written'; } catch (e) { tries[p] = e.code; }
    console.log(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), user: os.userInfo().username, tries }));`;
  const ro = node(id, probe);
  assert.equal(ro.status, 0, ro.out);
  assert.deepEqual(JSON.parse(ro.out), {
    uid: 2102,
    gid: 2102,
    user: 'outrigger',
    // An existing file's permissions are checked before the mount's read-only flag.
    tries: { '/app/dist/main.js': 'EACCES', '/app/new': 'EROFS', '/tmp/new': 'EROFS', '/new': 'EROFS' },
  });
  // A writable root (a runtime without readOnlyRootFilesystem): the image's files are still root's.
  const rw = run(id, ['--input-type=module', '-e', probe], ['--entrypoint', 'node', '--read-only=false']);
  assert.equal(rw.status, 0, rw.out);
  const tries = (JSON.parse(rw.out) as { tries: Record<string, string> }).tries;
  assert.equal(tries['/app/dist/main.js'], 'EACCES');
  assert.equal(tries['/app/new'], 'EACCES');
  assert.equal(tries['/new'], 'EACCES');
});

test('outrigger demo routes every demo request through the sidecar in the image', (t) => {
  const id = image(t);
  if (!id) return;
  // The statuses, not the demo's exit status: that also says whether the balancer already favoured
  // the fast pod, which depends on timing on a busy machine; where each request went does not.
  const demo = run(id, ['demo', '--requests', '20']);
  const row = (label: string): string => demo.out.split('\n').find((l) => l.startsWith(label)) ?? '';
  assert.match(demo.out, /discovery ready=true, 3 Services/, demo.out);
  assert.match(row('http://greeter.demo/hello'), /\s200 x20\s+greeter-/, demo.out);
  assert.match(row('http://inventory.demo/items'), /\s200 x20\s+inventory-/, demo.out);
  assert.match(row('http://orders.demo/'), /\s503 x3\s+-\s+no_endpoints x3\s/, demo.out);
  assert.match(row('http://127.0.0.1:'), /\s200 x3\s+this-pod-app x3\s/, demo.out);
  assert.match(row('(from another pod) /orders'), /\s200 x5\s+this-pod-app x5\s/, demo.out);
});

test('the init step loads the capture rules (nft and legacy) as root with NET_ADMIN and NET_RAW only, and koffi reads SO_ORIGINAL_DST', (t) => {
  const id = image(t);
  if (!id) return;
  // After the rules are loaded the namespace has NAT, so a connection that was not redirected
  // reports its own destination through getsockopt(SO_ORIGINAL_DST): libc called through koffi.
  const script = `import { execFileSync } from 'node:child_process';
    import net from 'node:net';
    const mode = process.env.MODE;
    execFileSync(process.execPath, ['/app/dist/main.js', 'iptables', '--iptables-mode', mode], { stdio: 'inherit' });
    const bin = mode === 'plain' ? 'iptables' : 'iptables-' + mode;
    const saved = execFileSync(bin + '-save', ['-t', 'nat'], { encoding: 'utf8' });
    const saved6 = execFileSync(bin.replace('iptables', 'ip6tables') + '-save', ['-t', 'nat'], { encoding: 'utf8' });
    // The bundle keeps the module the sidecar loads on use as a file of its own, named after it.
    const capture = (await import('node:fs')).readdirSync('/app/dist').find((f) => /^original-destination-\\w+\\.js$/.test(f));
    const { originalDestination } = await import('/app/dist/' + capture);
    const server = net.createServer((s) => {
      console.log(JSON.stringify({ saved, saved6, port: server.address().port, dest: originalDestination(s) }));
      s.destroy();
      server.close();
    });
    server.listen(0, '127.0.0.1', () => net.connect(server.address().port, '127.0.0.1').on('error', () => {}));`;
  for (const mode of ['plain', 'legacy']) {
    const r = node(id, script, [...INIT, ...RUN_VOLUME, '--env', `MODE=${mode}`]);
    assert.equal(r.status, 0, `${mode}: ${r.out}`);
    const line = r.out.split('\n').find((l) => l.startsWith('{'));
    assert.ok(line, r.out);
    const got = JSON.parse(line) as { saved: string; saved6: string; port: number; dest: unknown };
    for (const saved of [got.saved, got.saved6]) {
      assert.match(saved, /-m owner --uid-owner 2102 .*outrigger\/ignore-proxy-uid/, mode);
      assert.match(saved, /outrigger\/redirect-outbound" -j REDIRECT --to-ports 7400/, mode);
    }
    // iptables-nft-save names its backend in the header line; the legacy one names none.
    const header = got.saved.split('\n')[0] ?? '';
    assert.equal(header.includes('(nf_tables)'), mode === 'plain', header);
    assert.deepEqual(got.dest, { address: '127.0.0.1', port: got.port }, mode);
  }
  // The sidecar's own user cannot load rules.
  const denied = run(id, ['iptables']);
  assert.notEqual(denied.status, 0, denied.out);
  assert.match(denied.out, /NET_ADMIN and NET_RAW/);
});

test("node allocates with jemalloc, configured as the injector configures the sidecar's", async (t) => {
  const id = image(t);
  if (!id) return;
  // The maps name the preloaded library; background_thread:true (MALLOC_CONF) starts jemalloc's
  // purging thread, which a misspelt or ignored configuration would not.
  const script = `import { readFileSync, readdirSync } from 'node:fs';
const maps = readFileSync('/proc/self/maps', 'utf8');
const junk = [];
for (let i = 0; i < 2000; i++) junk.push(Buffer.allocUnsafeSlow(4096 + i));
await new Promise((r) => setTimeout(r, 300));
const threads = readdirSync('/proc/self/task').map((t) => readFileSync('/proc/self/task/' + t + '/comm', 'utf8').trim());
console.log(JSON.stringify({ jemalloc: maps.includes('libjemalloc.so.2'), threads, kept: junk.length }));`;
  const r = node(id, script);
  assert.equal(r.status, 0, r.out);
  const seen = JSON.parse(r.out.trim().split('\n').pop() ?? '{}') as { jemalloc: boolean; threads: string[] };
  assert.equal(seen.jemalloc, true, r.out);
  assert.ok(
    seen.threads.includes('jemalloc_bg_thd'),
    `jemalloc's background thread: ${seen.threads.join(', ')}`,
  );
  const { JEMALLOC_CONF } = await import('../../src/injector/containers.ts');
  const env = podman(['image', 'inspect', '--format', '{{json .Config.Env}}', id]).out;
  assert.ok((JSON.parse(env) as string[]).includes(`MALLOC_CONF=${JEMALLOC_CONF}`), env);
});
