// `outrigger inject` through the real CLI: bad manifests fail loudly, naming the file and object.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { runCli } from '../../harness/cli.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-inject-'));
const file = (name: string, text: string): string => {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
};

const pod = (name: string): string =>
  `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}}\nspec:\n  containers: [{name: app, image: nginx}]\n`;

test('a scalar document is an error naming the file, not silently dropped', async () => {
  const f = file('scalar.yaml', `${pod('a')}---\noops\n`);
  const r = await runCli(['inject', '-f', f]);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, new RegExp(`${f}: document 2 is "oops", not a Kubernetes object`));
  assert.equal(r.stdout, '');
});

test('a workload whose pod template has no container list is an error, not returned uninjected', async () => {
  const deployment = file(
    'bad-deploy.yaml',
    'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers: "oops"\n',
  );
  const r1 = await runCli(['inject', '-f', deployment]);
  assert.equal(r1.status, 2, r1.stderr);
  assert.match(
    r1.stderr,
    /bad-deploy\.yaml: deployment\/web: spec\.template\.spec\.containers must be a list/,
  );
  const noSpec = file('no-spec.yaml', 'apiVersion: v1\nkind: Pod\nmetadata: {name: lonely}\n');
  const r2 = await runCli(['inject', '-f', noSpec]);
  assert.equal(r2.status, 2, r2.stderr);
  assert.match(r2.stderr, /no-spec\.yaml: pod\/lonely: spec\.containers must be a list/);
});

test('a YAML syntax error names the file', async () => {
  const f = file('broken.yaml', 'kind: Pod\nmetadata: {name: [unclosed\n');
  const r = await runCli(['inject', '-f', f]);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, new RegExp(`${f.replace(/\./g, '\\.')}: invalid YAML`));
});

test('-f DIR injects every manifest file of the directory in name order, as kubectl reads it', async () => {
  const d = path.join(dir, 'app');
  mkdirSync(d);
  writeFileSync(path.join(d, 'b.yaml'), pod('second'));
  writeFileSync(path.join(d, 'a.yml'), pod('first'));
  writeFileSync(path.join(d, 'README.md'), '# not a manifest\n');
  const r = await runCli(['inject', '-f', d]);
  assert.equal(r.status, 0, r.stderr);
  const names = [...r.stdout.matchAll(/^ {2}name: (first|second)$/gm)].map((m) => m[1]);
  assert.deepEqual(names, ['first', 'second']);
  assert.equal((r.stdout.match(/name: outrigger-proxy/g) ?? []).length, 2, 'both pods injected');
});
