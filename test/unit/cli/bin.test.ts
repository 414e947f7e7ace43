import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../../harness/tools.ts';

const binDir = path.join(repoRoot, 'node_modules/.bin');

test('npx outrigger --help runs the compiled CLI on the pinned Node 24', (t) => {
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: repoRoot, encoding: 'utf8' });
  assert.equal(build.status, 0, build.stderr + build.stdout);
  assert.ok(existsSync(path.join(repoRoot, 'dist/main.js')));
  const env = { ...process.env, PATH: `${binDir}:${process.env.PATH ?? ''}` };
  const help = spawnSync('npx', ['--no-install', 'outrigger', '--help'], {
    cwd: repoRoot,
    env,
    encoding: 'utf8',
  });
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /Usage: outrigger/);
  const version = spawnSync('node', ['--version'], { env, encoding: 'utf8' });
  assert.match(version.stdout, /^v24\./);
  t.diagnostic(`node ${version.stdout.trim()}`);
});

test('the bin refuses an older Node with a message that says what to do', (t) => {
  const system = spawnSync('/usr/bin/node', ['--version'], { encoding: 'utf8' });
  if (system.status !== 0 || system.stdout.startsWith('v24')) {
    t.skip('no older system node at /usr/bin/node to check with');
    return;
  }
  const r = spawnSync('/usr/bin/node', [path.join(repoRoot, 'bin/outrigger.js'), '--help'], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /Node.js 24 or newer is required.*npx outrigger/);
});
