// The commands that read a running sidecar (`status`, `version`) and its /metrics, against a real
// `outrigger proxy` child process on the file source or on an unreachable API server.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { closedKubeconfig, runCli, startSidecar } from '../../harness/cli.ts';
import { httpGet } from '../../harness/http-get.ts';
import { freePort } from '../../harness/jaeger.ts';
import { fakeSaToken, identityEnv, testCa } from '../../harness/mesh.ts';
import { closedPort } from '../proxy/harness.ts';

test('status, version and /metrics of a ready sidecar', async (t) => {
  const { egress, admin } = await startSidecar(t, [
    '--source',
    'file:manifests/demo/cluster.yaml',
    '--namespace',
    'demo',
  ]);

  const metrics = await httpGet(admin, '/metrics');
  assert.equal(metrics.status, 200);
  assert.match(metrics.body, /^outrigger_process_cpu_seconds_total /m);
  assert.match(metrics.body, /^outrigger_nodejs_heap_size_used_bytes /m);
  assert.doesNotMatch(metrics.body, /outrigger_process_process_|outrigger_process_nodejs_/);

  const status = await runCli(['status', '--admin', `127.0.0.1:${admin}`]);
  assert.equal(status.status, 0, status.stderr);
  assert.match(status.stdout, /^ready: yes/);
  const json = await runCli(['status', '--admin', `http://127.0.0.1:${admin}`, '-o', 'json']);
  assert.equal(json.status, 0, json.stderr);
  assert.equal((JSON.parse(json.stdout) as { ready: boolean }).ready, true);

  // The egress port answers HTTP, but it is not the admin API.
  const wrong = await runCli(['status', '--admin', `127.0.0.1:${egress}`]);
  assert.equal(wrong.status, 1, wrong.stderr);
  assert.match(wrong.stderr, /not an Outrigger admin API/);
  assert.doesNotMatch(wrong.stderr, /Unexpected token|JSON/);

  const version = await runCli(['version', '--client', '--admin', `127.0.0.1:${admin}`]);
  assert.equal(version.status, 0, version.stderr);
  assert.match(version.stdout, /^client: {2}outrigger 0\.1\.0 \(Node\.js v24\./m);
  assert.match(version.stdout, /^sidecar: outrigger 0\.1\.0 \(Node\.js v24\./m);
  const vjson = await runCli(['version', '--client', '-o', 'json']);
  assert.equal(vjson.status, 0, vjson.stderr);
  assert.deepEqual(Object.keys(JSON.parse(vjson.stdout) as object), ['client']);
});

test('status of a sidecar whose API server ($KUBECONFIG) is unreachable says why it is not ready and exits 1', async (t) => {
  const kubeconfig = closedKubeconfig(mkdtempSync(path.join(os.tmpdir(), 'outrigger-status-')));
  // Outside a pod the sidecar takes $KUBECONFIG, as kubectl does.
  const { admin } = await startSidecar(t, [], { KUBECONFIG: kubeconfig });
  let r = await runCli(['status', '--admin', `127.0.0.1:${admin}`]);
  for (let i = 0; i < 20 && !/API request\(s\) failed/.test(r.stdout); i++) {
    await new Promise((res) => setTimeout(res, 250));
    r = await runCli(['status', '--admin', `127.0.0.1:${admin}`]);
  }
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stdout, /^ready: no /);
  assert.match(
    r.stdout,
    /^not ready: discovery has not synced: \d+ API request\(s\) failed so far; the sidecar's log/m,
  );
});

test('status of a strict sidecar without a certificate names the certificate, not discovery', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-status-mesh-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'cluster.yaml'), '');
  writeFileSync(path.join(dir, 'ca.crt'), (await testCa()).trustBundle);
  writeFileSync(path.join(dir, 'token'), fakeSaToken('shop', 'web'));
  // The issuer is a closed port: discovery (the file) is synced, the certificate never comes.
  const issuer = `https://127.0.0.1:${await closedPort()}/`;
  const { admin } = await startSidecar(
    t,
    [
      '--source',
      `file:${path.join(dir, 'cluster.yaml')}`,
      '--mtls',
      'strict',
      '--mesh-port',
      String(await freePort()),
    ],
    identityEnv(issuer, dir),
  );
  let r = await runCli(['status', '--admin', `127.0.0.1:${admin}`]);
  for (let i = 0; i < 20 && !/issuer unreachable/.test(r.stdout); i++) {
    await new Promise((res) => setTimeout(res, 250));
    r = await runCli(['status', '--admin', `127.0.0.1:${admin}`]);
  }
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stdout, /^ready: no /m);
  assert.match(
    r.stdout,
    /^not ready: no valid mesh certificate \(strict mTLS needs one\): identity issuer unreachable: connect ECONNREFUSED/m,
  );
  assert.doesNotMatch(r.stdout, /discovery has not synced/);
});

test("version asks the cluster of the kubeconfig for its side; an unreachable one still shows the client's, then fails naming the API server", async () => {
  const kubeconfig = closedKubeconfig(mkdtempSync(path.join(os.tmpdir(), 'outrigger-version-')));
  const r = await runCli(['version', '--kubeconfig', kubeconfig]);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stdout, /^client: {2}outrigger 0\.1\.0 \(Node\.js v24\./m);
  assert.match(r.stderr, /cannot reach the API server https:\/\/127\.0\.0\.1:1/);
  const client = await runCli(['version', '--client', '--kubeconfig', kubeconfig]);
  assert.equal(client.status, 0, 'the client alone never calls the API');
});
