// `outrigger install | kubectl apply -f -` then `outrigger check` against the real API server, with
// the webhook running as a local process (the install's --webhook-url mode), and `check` failing
// with what to do for each broken piece: missing RBAC, a stale caBundle, an expired serving
// certificate, no webhook endpoints.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { makeCa, issueServing } from '../../src/cli/pki.ts';
import {
  closedKubeconfig,
  runCli,
  startCli,
  stopCli,
  waitForOutput,
  type CliProcess,
} from '../harness/cli.ts';
import { startCluster, type TestCluster } from '../harness/cluster.ts';
import { freePort } from '../harness/jaeger.ts';
import { testBinaries } from '../harness/tools.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-install-'));
const DAY = 86_400_000;

describe('install and check against a real API server', { concurrency: 1, timeout: 300_000 }, () => {
  let cluster: TestCluster | undefined;
  let kubectl = '';
  let port = 0;
  let webhook: CliProcess | undefined;
  const env = (): Record<string, string> => ({ KUBECONFIG: cluster?.kubeconfigPath ?? '' });

  const sh = (script: string) =>
    spawnSync('bash', ['-c', script], {
      encoding: 'utf8',
      env: { ...process.env, ...env(), KUBECTL: kubectl },
    });
  const check = (...extra: string[]) => runCli(['check', ...extra], { env: env() });

  async function startWebhook(cert: string, key: string): Promise<void> {
    const certFile = path.join(dir, `tls-${Date.now()}.crt`);
    const keyFile = `${certFile}.key`;
    writeFileSync(certFile, cert);
    writeFileSync(keyFile, key);
    webhook = startCli(
      ['webhook', '--listen', `127.0.0.1:${port}`, '--tls-cert', certFile, '--tls-key', keyFile],
      { env: { POD_NAMESPACE: 'outrigger-system', OUTRIGGER_WEBHOOK_SHUTDOWN_DELAY_SECONDS: '0' } },
    );
    await waitForOutput(webhook, /webhook listening/);
  }

  async function stopWebhook(): Promise<void> {
    if (webhook) await stopCli(webhook);
    webhook = undefined;
  }

  /** The secret's certificate and key, as the webhook Deployment would mount them. */
  function secretFile(key: string): string {
    const r = sh(
      `"$KUBECTL" -n outrigger-system get secret outrigger-webhook-tls -o jsonpath='{.data.${key.replace('.', '\\.')}}'`,
    );
    assert.equal(r.status, 0, r.stderr);
    return Buffer.from(r.stdout, 'base64').toString('utf8');
  }

  function setCaBundle(caPem: string): void {
    const b64 = Buffer.from(caPem).toString('base64');
    const ops = [0, 1, 2].map((i) => ({
      op: 'replace',
      path: `/webhooks/${i}/clientConfig/caBundle`,
      value: b64,
    }));
    const r = sh(
      `"$KUBECTL" patch mutatingwebhookconfiguration outrigger-injector --type=json -p '${JSON.stringify(ops)}'`,
    );
    assert.equal(r.status, 0, r.stderr);
  }

  let starting: Promise<TestCluster | undefined> | undefined;
  /** One cluster for the suite, started by the first test (skipped locally without the binaries, failed under CI). */
  async function clusterFor(t: TestContext): Promise<TestCluster | undefined> {
    starting ??= startCluster(t);
    cluster = await starting;
    return cluster;
  }

  before(async () => {
    kubectl = testBinaries().kubectl;
    port = await freePort();
  });

  after(async () => {
    await stopWebhook();
    await cluster?.stop();
  });

  test('install | kubectl apply -f -, then check passes and a pod is injected', async (t) => {
    if (!(await clusterFor(t))) return;
    const apply = sh(
      `node ${path.join(import.meta.dirname, '../../src/main.ts')} install --namespaces shop --webhook-url https://127.0.0.1:${port} | "$KUBECTL" apply -f -`,
    );
    assert.equal(apply.status, 0, apply.stderr);
    assert.match(apply.stdout, /mutatingwebhookconfiguration.*outrigger-injector created/);
    assert.match(apply.stdout, /clusterrolebinding.*outrigger-sidecar-shop created/);
    await startWebhook(secretFile('tls.crt'), secretFile('tls.key'));
    const r = await check();
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /\[ok\] +caBundle: matches the serving certificate/);
    assert.match(r.stdout, /\[ok\] +webhook endpoints: the webhook at https:\/\/127\.0\.0\.1:\d+ answers/);
    assert.match(r.stdout, /\[ok\] +sidecar RBAC shop/);
    assert.match(
      r.stdout,
      /\[ok\] +webhook RBAC: ServiceAccount outrigger-system\/outrigger-webhook has no access/,
    );
    assert.match(r.stdout, /all checks passed/);
    const json = await check('-o', 'json');
    assert.equal(json.status, 0);
    assert.ok((JSON.parse(json.stdout) as { outcome: string }[]).every((c) => c.outcome !== 'fail'));
    const pod = sh(
      `printf 'apiVersion: v1\\nkind: Pod\\nmetadata: {name: p1, namespace: shop}\\nspec:\\n  containers: [{name: app, image: app}]\\n' | "$KUBECTL" apply -f - && "$KUBECTL" -n shop get pod p1 -o jsonpath='{.spec.initContainers[*].name}'`,
    );
    assert.equal(pod.status, 0, pod.stderr);
    assert.match(pod.stdout, /outrigger-proxy/);
  });

  test('check fails for a meshed namespace whose ServiceAccounts lack the sidecar RBAC', async (t) => {
    if (!(await clusterFor(t))) return;
    const ns = sh(
      `"$KUBECTL" create namespace bare && "$KUBECTL" label namespace bare outrigger.dev/injection=enabled`,
    );
    assert.equal(ns.status, 0, ns.stderr);
    const r = await check();
    assert.equal(r.status, 1, r.stdout);
    assert.match(
      r.stdout,
      /\[FAIL\] sidecar RBAC bare: its ServiceAccounts may not list services, watch services/,
    );
    assert.match(r.stdout, /fix: outrigger install --namespaces bare \| kubectl apply -f -/);
    assert.equal(sh(`"$KUBECTL" label namespace bare outrigger.dev/injection-`).status, 0);
  });

  test('check warns when the webhook ServiceAccount has access it does not need', async (t) => {
    if (!(await clusterFor(t))) return;
    const bind = sh(
      `"$KUBECTL" create clusterrolebinding too-much --clusterrole=cluster-admin --serviceaccount=outrigger-system:outrigger-webhook`,
    );
    assert.equal(bind.status, 0, bind.stderr);
    const r = await check();
    assert.equal(r.status, 0, r.stdout);
    assert.match(
      r.stdout,
      /\[warn\] webhook RBAC: ServiceAccount outrigger-system\/outrigger-webhook may list Secrets/,
    );
    assert.match(r.stdout, /all checks passed \(1 warning\(s\)\)/);
    assert.equal(sh(`"$KUBECTL" delete clusterrolebinding too-much`).status, 0);
  });

  test('check fails for a stale caBundle and for an expired serving certificate', async (t) => {
    if (!(await clusterFor(t))) return;
    const now = Date.now();
    const other = makeCa('another-ca', { notBefore: new Date(now - DAY), notAfter: new Date(now + DAY) });
    setCaBundle(other.certPem);
    const stale = await check();
    assert.equal(stale.status, 1, stale.stdout);
    assert.match(
      stale.stdout,
      /\[FAIL\] caBundle: the serving certificate .* is not signed by the caBundle's CA \(CN=another-ca\)/,
    );
    assert.match(stale.stdout, /fix: apply the caBundle and the Secret from the same run/);

    // A certificate from the right CA whose validity ended yesterday.
    const expired = issueServing(other, ['127.0.0.1'], {
      notBefore: new Date(now - 3 * DAY),
      notAfter: new Date(now - DAY),
    });
    await stopWebhook();
    await startWebhook(expired.certPem, expired.keyPem);
    const r = await check();
    assert.equal(r.status, 1, r.stdout);
    assert.match(r.stdout, /\[ok\] +caBundle: matches/);
    assert.match(r.stdout, /\[FAIL\] certificate expiry: the serving certificate expired on/);
    assert.match(r.stdout, /fix: issue a new one: outrigger install \| kubectl apply -f -/);
  });

  test('check fails when no webhook answers: by URL, and for the in-cluster Service', async (t) => {
    if (!(await clusterFor(t))) return;
    await stopWebhook();
    const byUrl = await check();
    assert.equal(byUrl.status, 1, byUrl.stdout);
    assert.match(
      byUrl.stdout,
      /\[FAIL\] webhook endpoints: no webhook answers at https:\/\/127\.0\.0\.1:\d+ .*ECONNREFUSED/,
    );
    assert.match(byUrl.stdout, /fix: start the webhook/);
    // The in-cluster form: a Service whose Deployment never became ready (no kubelet here).
    const apply = sh(
      `node ${path.join(import.meta.dirname, '../../src/main.ts')} install --namespaces shop | "$KUBECTL" apply -f -`,
    );
    assert.equal(apply.status, 0, apply.stderr);
    const r = await check();
    assert.equal(r.status, 1, r.stdout);
    assert.match(
      r.stdout,
      /\[ok\] +caBundle: matches the serving certificate from Secret outrigger-system\/outrigger-webhook-tls/,
    );
    assert.match(
      r.stdout,
      /\[FAIL\] webhook endpoints: Service outrigger-system\/outrigger-webhook has no ready endpoint/,
    );
    assert.match(r.stdout, /fix: kubectl -n outrigger-system get deploy,pods/);
  });

  test('check with an unreachable API server fails at the first step and says what to check', async (t) => {
    if (!(await clusterFor(t))) return;
    const kc = closedKubeconfig(dir);
    const r = await runCli(['check', '--kubeconfig', kc]);
    assert.equal(r.status, 1, r.stdout);
    assert.match(
      r.stdout,
      /\[FAIL\] API server: cannot reach the API server https:\/\/127\.0\.0\.1:1 \(.*ECONNREFUSED/,
    );
    assert.match(r.stdout, /fix: check the kubeconfig/);
  });
});
