import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { applyPatch } from '../../../src/injector/patch.ts';
import type { Container, PatchOp, PodLike } from '../../../src/injector/types.ts';
import { repoRoot } from '../../harness/tools.ts';

const main = path.join(repoRoot, 'src/main.ts');
const outrigger = (...args: string[]) =>
  spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout: 30_000 });

test('outrigger webhook refuses bad configuration with status 2 before listening', () => {
  const port = outrigger('webhook', '--https-port', 'nowhere');
  assert.equal(port.status, 2);
  assert.match(port.stderr, /invalid flag --https-port="nowhere": expected an integer from 0 to 65535/);
  const cpu = outrigger('webhook', '--proxy-cpu', 'fast', '--https-port', '0');
  assert.equal(cpu.status, 2);
  assert.match(cpu.stderr, /invalid flag --proxy-cpu="fast": expected a Kubernetes quantity/);
});

test('outrigger webhook still takes --listen HOST:PORT, with a warning naming its new spelling', () => {
  const bad = outrigger('webhook', '--listen', 'nowhere');
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /invalid flag --listen="nowhere": expected HOST:PORT/);
  const r = outrigger('webhook', '--listen', '127.0.0.1:0', '--tls-cert', '/nonexistent/tls.crt');
  assert.equal(r.status, 1);
  const warnings = r.stderr.split('\n').filter((l) => l.includes('deprecated'));
  assert.deepEqual(warnings, [
    'outrigger: warning: --listen is deprecated and goes in the next release; use --listen-host and --https-port',
  ]);
});

test('outrigger webhook fails (status 1) when its certificate is missing', () => {
  const r = outrigger(
    'webhook',
    '--https-port',
    '0',
    '--tls-cert',
    '/nonexistent/tls.crt',
    '--tls-key',
    '/nonexistent/tls.key',
  );
  assert.equal(r.status, 1);
  assert.match(r.stderr, /ENOENT.*tls\.(crt|key)/);
});

test('outrigger inject takes mesh-wide defaults from flags; annotations still win', () => {
  const r = spawnSync(
    process.execPath,
    [main, 'inject', '-f', '-', '--proxy-image', 'registry.example/outrigger:9', '--proxy-cpu', '300m'],
    {
      encoding: 'utf8',
      input:
        'kind: Pod\nmetadata: {name: p, annotations: {outrigger.dev/proxy-cpu: 20m}}\nspec: {containers: [{name: a}]}\n',
    },
  );
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /image: registry\.example\/outrigger:9/);
  assert.match(r.stdout, /cpu: 20m/);
  assert.doesNotMatch(r.stdout, /cpu: 300m/);
});

test("the injected init container's args and env drive `outrigger iptables` as the pod asked", () => {
  const dir = path.join(repoRoot, 'test/golden/injector');
  const input = JSON.parse(readFileSync(path.join(dir, 'all-annotations.in.json'), 'utf8')) as {
    review: { request: { object: PodLike } };
  };
  const out = JSON.parse(readFileSync(path.join(dir, 'all-annotations.out.json'), 'utf8')) as {
    patch: PatchOp[];
  };
  const pod = applyPatch(input.review.request.object, out.patch);
  const init = pod.spec.initContainers?.find((c) => c.name === 'outrigger-init') as Container & {
    args: string[];
  };
  const env = Object.fromEntries((init.env ?? []).map((e) => [e.name, e.value ?? '']));
  const r = spawnSync(process.execPath, [main, ...init.args, '--dry-run'], {
    encoding: 'utf8',
    env: { ...env, PATH: process.env.PATH },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /--uid-owner 2102 .*-j RETURN/);
  assert.match(r.stdout, /--dports 7402,7403,25,8000:8100 .*ignore-inbound-ports/);
  assert.match(r.stdout, /--dports 5432 .*ignore-outbound-ports/);
  assert.match(r.stdout, /-s 192\.168\.0\.0\/16 .*ignore-inbound-cidr/);
  assert.match(r.stdout, /-d 10\.0\.0\.0\/8 .*ignore-outbound-cidr/);
  assert.match(r.stdout, /-d fd00::\/8 .*ignore-outbound-cidr/);
});
