import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { clusterBinariesBuilt, repoRoot, requireTool } from '../harness/tools.ts';

test(
  'a user can run: test-cluster up; eval "$(test-cluster env)"; kubectl get --raw /version',
  { timeout: 180_000 },
  (t) => {
    if (!requireTool(t, clusterBinariesBuilt(), 'the test cluster', "run 'scripts/test-cluster build'"))
      return;
    const state = mkdtempSync(path.join(os.tmpdir(), 'outrigger-user-'));
    const env = { ...process.env, OUTRIGGER_CLUSTER_DIR: state };
    t.after(() => {
      spawnSync('bash', ['scripts/test-cluster', 'down'], { cwd: repoRoot, env, stdio: 'ignore' });
      rmSync(state, { recursive: true, force: true });
    });
    const script = [
      'set -e',
      'scripts/test-cluster up >/dev/null',
      'eval "$(scripts/test-cluster env)"',
      'kubectl get --raw /version',
      'kubectl version --client -o json',
      'kubectl auth can-i list endpointslices --all-namespaces',
    ].join('\n');
    const r = spawnSync('bash', ['-c', script], { cwd: repoRoot, env, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /"gitVersion": "v1\.33\.\d+"/);
    assert.match(r.stdout, /"clientVersion"/);
    assert.match(r.stdout, /\byes\b/);
  },
);
