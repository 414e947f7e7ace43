// `outrigger install --identity` against the real API server: it installs the issuer and a mesh
// CA, check passes on it, a re-run (with or without the flag) keeps both byte for byte, a CA of
// the user's own (scripts/gen-mesh-ca's Secret) is kept and never printed, and uninstall leaves
// nothing of the issuer. The webhook runs as a local process (--webhook-url): this cluster has
// no kubelet, so no Deployment of it ever becomes ready, and check reads the issuer's CA only.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { clusterShell, runCli, startCli, stopCli, waitForOutput, type CliProcess } from '../harness/cli.ts';
import { startCluster, type TestCluster } from '../harness/cluster.ts';
import { freePort } from '../harness/jaeger.ts';
import { repoRoot, testBinaries } from '../harness/tools.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-install-identity-'));
const cli = `node ${path.join(import.meta.dirname, '../../src/main.ts')}`;

describe('install --identity against a real API server', { concurrency: 1, timeout: 300_000 }, () => {
  let cluster: TestCluster | undefined;
  let port = 0;
  let webhook: CliProcess | undefined;
  const env = (): Record<string, string> => ({ KUBECONFIG: cluster?.kubeconfigPath ?? '' });
  const sh = clusterShell(
    () => cluster?.kubeconfigPath ?? '',
    () => testBinaries().kubectl,
  );
  const kubectl = (args: string): string => {
    const r = sh(`"$KUBECTL" ${args}`);
    assert.equal(r.status, 0, `kubectl ${args}\n${r.stderr}`);
    return r.stdout;
  };
  const caSecret = (): string =>
    kubectl(`-n outrigger-system get secret outrigger-identity-ca -o jsonpath='{.data}'`);

  let starting: Promise<TestCluster | undefined> | undefined;
  async function clusterFor(t: TestContext): Promise<TestCluster | undefined> {
    starting ??= startCluster(t);
    cluster = await starting;
    return cluster;
  }

  /** The webhook as the installed Secret would serve it, on the --webhook-url of the install. */
  async function startWebhook(): Promise<void> {
    const file = (key: string): string => {
      const b64 = kubectl(
        `-n outrigger-system get secret outrigger-webhook-tls -o jsonpath='{.data.${key.replace('.', '\\.')}}'`,
      );
      const f = path.join(dir, key);
      writeFileSync(f, Buffer.from(b64, 'base64'), { mode: 0o600 });
      return f;
    };
    const args = ['--listen-host', '127.0.0.1', '--https-port', String(port)];
    webhook = startCli(['webhook', ...args, '--tls-cert', file('tls.crt'), '--tls-key', file('tls.key')], {
      env: { OUTRIGGER_POD_NAMESPACE: 'outrigger-system', OUTRIGGER_SHUTDOWN_DELAY: '0s' },
    });
    await waitForOutput(webhook, /webhook listening/);
  }

  before(async () => {
    port = await freePort();
  });
  after(async () => {
    if (webhook) await stopCli(webhook);
    await cluster?.stop();
  });

  test('install --identity installs the issuer and its CA, and check passes', async (t) => {
    if (!(await clusterFor(t))) return;
    const r = sh(`${cli} install --identity --webhook-url https://127.0.0.1:${port} | "$KUBECTL" apply -f -`);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /a new mesh CA: a root valid until .*the root's key is not kept/);
    for (const made of [
      'secret/outrigger-identity-ca created',
      'configmap/outrigger-trust-bundle created',
      'deployment.apps/outrigger-identity created',
      'service/outrigger-identity created',
      'clusterrolebinding.rbac.authorization.k8s.io/outrigger-identity created',
      'poddisruptionbudget.policy/outrigger-identity created',
    ])
      assert.ok(r.stdout.includes(made), `${made} in\n${r.stdout}`);
    await startWebhook();
    const check = await runCli(['check'], { env: env() });
    assert.equal(check.status, 0, check.stdout + check.stderr);
    assert.match(
      check.stdout,
      /\[ok\] +mesh CA: the issuing CA of Secret outrigger-system\/outrigger-identity-ca is valid until/,
    );
  });

  test('re-running install, without --identity or with it, keeps the issuer and the same CA', async (t) => {
    if (!(await clusterFor(t))) return;
    const before = caSecret();
    for (const flags of ['', '--identity']) {
      const r = sh(`${cli} install ${flags} | "$KUBECTL" apply -f -`);
      assert.equal(r.status, 0, r.stderr);
      if (flags === '') assert.match(r.stderr, /keeping the installed identity issuer/);
      assert.match(r.stderr, /keeping the mesh CA of Secret outrigger-system\/outrigger-identity-ca/);
      assert.match(r.stdout, /secret\/outrigger-identity-ca unchanged/);
      assert.match(r.stdout, /deployment\.apps\/outrigger-identity unchanged/);
      assert.equal(caSecret(), before, 'the same CA');
    }
  });

  test("a mesh CA of the user's own (scripts/gen-mesh-ca) is kept and never printed, nor listed by uninstall", async (t) => {
    if (!(await clusterFor(t))) return;
    const out = path.join(dir, 'mesh-ca');
    const own = sh(
      `${path.join(repoRoot, 'scripts/gen-mesh-ca')} --out ${out} && "$KUBECTL" apply -f ${out}/manifests.yaml`,
    );
    assert.equal(own.status, 0, own.stderr);
    const mine = caSecret();
    const r = sh(`${cli} install --identity | "$KUBECTL" apply -f -`);
    assert.equal(r.status, 0, r.stderr);
    assert.match(
      r.stderr,
      /keeping your mesh CA \(not made by install: not printed, and uninstall leaves it\)/,
    );
    assert.doesNotMatch(r.stdout, /outrigger-identity-ca|configmap\/outrigger-trust-bundle/);
    assert.equal(caSecret(), mine);
    const un = sh(`${cli} uninstall`);
    assert.equal(un.status, 0, un.stderr);
    assert.doesNotMatch(un.stdout, /outrigger-identity-ca/);
    assert.match(
      un.stderr,
      /Secret outrigger-system\/outrigger-identity-ca has no app\.kubernetes\.io\/name=outrigger label/,
    );
    // Made install's again, for the uninstall test that follows.
    kubectl(
      '-n outrigger-system label secret/outrigger-identity-ca configmap/outrigger-trust-bundle app.kubernetes.io/name=outrigger',
    );
  });

  test('uninstall | kubectl delete -f - leaves nothing of the issuer or its CA', async (t) => {
    if (!(await clusterFor(t))) return;
    const un = sh(`${cli} uninstall`);
    assert.equal(un.status, 0, un.stderr);
    const kinds = parseAllDocuments(un.stdout).map((d) => {
      const o = d.toJS() as { kind: string; metadata: { name: string } };
      return `${o.kind}/${o.metadata.name}`;
    });
    for (const k of [
      'Secret/outrigger-identity-ca',
      'ConfigMap/outrigger-trust-bundle',
      'Deployment/outrigger-identity',
    ])
      assert.ok(kinds.includes(k), `${k} in ${kinds.join(', ')}`);
    assert.doesNotMatch(un.stdout, /tls\.key/, 'no secret material');
    const del = sh(`${cli} uninstall | "$KUBECTL" delete --wait=false -f -`);
    assert.equal(del.status, 0, del.stderr);
    const left = kubectl(
      `get clusterroles,clusterrolebindings -l app.kubernetes.io/component=identity -o name && "$KUBECTL" -n outrigger-system get deployments,services,secrets,configmaps,serviceaccounts,poddisruptionbudgets -l app.kubernetes.io/name=outrigger -o name`,
    );
    assert.equal(left.trim(), '', 'nothing of the issuer is left');
  });
});
