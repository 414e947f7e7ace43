import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../../harness/tools.ts';

const main = path.join(repoRoot, 'src/main.ts');
const outrigger = (...args: string[]) =>
  spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout: 30_000 });

test('outrigger webhook refuses bad configuration with status 2 before listening', () => {
  const listen = outrigger('webhook', '--listen', 'nowhere');
  assert.equal(listen.status, 2);
  assert.match(listen.stderr, /invalid flag --listen="nowhere": expected HOST:PORT/);
  const cpu = outrigger('webhook', '--proxy-cpu', 'fast', '--listen', '127.0.0.1:0');
  assert.equal(cpu.status, 2);
  assert.match(cpu.stderr, /invalid flag --proxy-cpu="fast": expected a Kubernetes quantity/);
});

test('outrigger webhook fails (status 1) when its certificate is missing', () => {
  const r = outrigger(
    'webhook',
    '--listen',
    '127.0.0.1:0',
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
