// `outrigger install | kubectl apply -f -` then `outrigger check` against the real API server, with
// the webhook running as a local process (the install's --webhook-url mode), and `check` failing
// with what to do for each broken piece: missing RBAC, a stale caBundle, an expired serving
// certificate, no webhook endpoints; each fix is run as printed and must keep the install's
// shape. Re-running install keeps the certificate; `outrigger uninstall | kubectl delete -f -`
// leaves nothing behind but the user's namespaces.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { makeCa, issueServing } from '../../src/cli/pki.ts';
import {
  closedKubeconfig,
  clusterShell,
  runCli,
  startCli,
  stopCli,
  waitForOutput,
  type CliProcess,
} from '../harness/cli.ts';
import { startCluster, type TestCluster } from '../harness/cluster.ts';
import { freePort } from '../harness/jaeger.ts';
import { repoRoot, testBinaries } from '../harness/tools.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-install-'));
const DAY = 86_400_000;
const cli = `node ${path.join(import.meta.dirname, '../../src/main.ts')}`;

/** The kubectl commands a CLI printed for the user to run (indented lines on stderr). */
const printedCommands = (stderr: string): string[] =>
  [...stderr.matchAll(/^ {2}(kubectl .*)$/gm)].map((m) => m[1] ?? '');

/** The `outrigger install ... | kubectl apply -f -` a check advised, as a shell line of this checkout. */
function advisedInstall(checkOut: string, check: string): string {
  const m = new RegExp(`${check}:.*\\n *fix: [^\\n]*?(outrigger install [^|]*\\| kubectl apply -f -)`).exec(
    checkOut,
  );
  assert.ok(m?.[1], `no install advised for ${check} in:\n${checkOut}`);
  return m[1].replace(/^outrigger /, `${cli} `).replace('kubectl', '"$KUBECTL"');
}

describe('install and check against a real API server', { concurrency: 1, timeout: 300_000 }, () => {
  let cluster: TestCluster | undefined;
  let kubectl = '';
  let port = 0;
  let webhook: CliProcess | undefined;
  const env = (): Record<string, string> => ({ KUBECONFIG: cluster?.kubeconfigPath ?? '' });

  const sh = clusterShell(
    () => cluster?.kubeconfigPath ?? '',
    () => kubectl,
  );
  const check = (...extra: string[]) => runCli(['check', ...extra], { env: env() });

  async function startWebhook(cert: string, key: string): Promise<void> {
    const certFile = path.join(dir, `tls-${Date.now()}.crt`);
    const keyFile = `${certFile}.key`;
    writeFileSync(certFile, cert);
    writeFileSync(keyFile, key);
    await startWebhookFiles(certFile, keyFile);
  }

  async function startWebhookFiles(certFile: string, keyFile: string): Promise<void> {
    webhook = startCli(
      [
        'webhook',
        '--listen-host',
        '127.0.0.1',
        '--https-port',
        String(port),
        '--tls-cert',
        certFile,
        '--tls-key',
        keyFile,
      ],
      { env: { OUTRIGGER_POD_NAMESPACE: 'outrigger-system', OUTRIGGER_SHUTDOWN_DELAY: '0s' } },
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

  /**
   * The README's commands that write the webhook's certificate and key for a local webhook, run
   * as written in a scratch checkout directory over a key file left world-readable by an earlier
   * run: the key must end up private, under a git-ignored path.
   */
  function readmeCertificateCommands(): { certFile: string; keyFile: string } {
    const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
    const writes = [...readme.matchAll(/^\$ (.*get secret outrigger-webhook-tls.*)$/gm)].map(
      (m) => m[1] ?? '',
    );
    const serve = /^\$ npx outrigger webhook .*--tls-cert (\S+) --tls-key (\S+)/m.exec(readme);
    assert.ok(writes.length > 0 && serve?.[1] && serve[2], 'the README shows how to write and use the files');
    const [cert, key] = [serve[1], serve[2]];
    const cwd = mkdtempSync(path.join(dir, 'checkout-'));
    mkdirSync(path.dirname(path.join(cwd, key)), { recursive: true });
    writeFileSync(path.join(cwd, key), 'stale', { mode: 0o644 });
    chmodSync(path.join(cwd, key), 0o644);
    for (const line of writes) {
      const r = spawnSync('bash', ['-c', line], {
        cwd,
        encoding: 'utf8',
        env: { ...process.env, ...env(), PATH: `${path.dirname(kubectl)}:${process.env.PATH ?? ''}` },
      });
      assert.equal(r.status, 0, `${line}\n${r.stderr}`);
    }
    const mode = statSync(path.join(cwd, key)).mode & 0o777;
    assert.equal(mode.toString(8), '600', `${key} is readable by its owner only`);
    const ignored = spawnSync('git', ['-C', repoRoot, 'check-ignore', '-q', key]);
    assert.equal(ignored.status, 0, `${key} is git-ignored in a checkout`);
    return { certFile: path.join(cwd, cert), keyFile: path.join(cwd, key) };
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

  /** The webhook configuration's caBundle (the first webhook's) and its first webhook's clientConfig. */
  function installed(): { caBundle: string; url: string; crt: string } {
    const r = sh(
      `"$KUBECTL" get mutatingwebhookconfiguration outrigger-injector -o jsonpath='{.webhooks[0].clientConfig.caBundle} {.webhooks[0].clientConfig.url}'`,
    );
    assert.equal(r.status, 0, r.stderr);
    const [caBundle = '', url = ''] = r.stdout.split(' ');
    return { caBundle, url, crt: secretFile('tls.crt') };
  }

  function createPod(name: string): string {
    const pod = sh(
      `printf 'apiVersion: v1\\nkind: Pod\\nmetadata: {name: ${name}, namespace: shop}\\nspec:\\n  containers: [{name: app, image: app}]\\n' | "$KUBECTL" apply -f - && "$KUBECTL" -n shop get pod ${name} -o jsonpath='{.spec.initContainers[*].name}'`,
    );
    assert.equal(pod.status, 0, pod.stderr);
    return pod.stdout;
  }

  test('install prints only what it owns and says how to opt the namespace in; then check passes and a pod is injected', async (t) => {
    if (!(await clusterFor(t))) return;
    const file = path.join(dir, 'install.yaml');
    const render = sh(`${cli} install --namespaces shop --webhook-url https://127.0.0.1:${port} > ${file}`);
    assert.equal(render.status, 0, render.stderr);
    const kinds = parseAllDocuments(readFileSync(file, 'utf8')).map((d) => {
      const o = d.toJS() as { kind: string; metadata: { name: string } };
      return `${o.kind}/${o.metadata.name}`;
    });
    assert.deepEqual(
      kinds.filter((k) => k.startsWith('Namespace/')),
      ['Namespace/outrigger-system'],
      'the only namespace printed is its own',
    );
    // The reverse of the install, as a user would try it, deletes no namespace of theirs.
    const dryDelete = sh(`"$KUBECTL" delete --dry-run=server -f ${file}`);
    assert.doesNotMatch(dryDelete.stdout + dryDelete.stderr, /namespace "shop"/);
    const commands = printedCommands(render.stderr);
    assert.deepEqual(commands, [
      'kubectl create namespace shop',
      'kubectl label namespace shop outrigger.dev/injection=enabled',
    ]);

    const apply = sh(`"$KUBECTL" apply -f ${file}`);
    assert.equal(apply.status, 0, apply.stderr);
    assert.match(apply.stdout, /mutatingwebhookconfiguration.*outrigger-injector created/);
    assert.match(apply.stdout, /clusterrolebinding.*outrigger-sidecar-shop created/);
    for (const c of commands) assert.equal(sh(c.replace(/^kubectl/, '"$KUBECTL"')).status, 0, c);
    const { certFile, keyFile } = readmeCertificateCommands();
    await startWebhookFiles(certFile, keyFile);
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
    assert.match(createPod('p1'), /outrigger-proxy/);
  });

  test('re-running install without flags keeps the certificate, the caBundle and the webhook URL', async (t) => {
    if (!(await clusterFor(t))) return;
    const before = installed();
    const again = sh(`${cli} install | "$KUBECTL" apply -f -`);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /secret\/outrigger-webhook-tls unchanged/);
    assert.match(again.stdout, /mutatingwebhookconfiguration\S* unchanged/);
    assert.doesNotMatch(again.stdout, /deployment/);
    assert.match(again.stderr, /keeping the webhook URL https:\/\/127\.0\.0\.1:\d+/);
    assert.match(again.stderr, /keeping the webhook certificate/);
    assert.deepEqual(installed(), before);
    assert.equal((await check()).status, 0);
  });

  test('check fails for a meshed namespace whose ServiceAccounts lack the sidecar RBAC; its fix keeps the install working', async (t) => {
    if (!(await clusterFor(t))) return;
    const ns = sh(
      `"$KUBECTL" create namespace bare && "$KUBECTL" label namespace bare outrigger.dev/injection=enabled`,
    );
    assert.equal(ns.status, 0, ns.stderr);
    const before = installed();
    const r = await check();
    assert.equal(r.status, 1, r.stdout);
    assert.match(
      r.stdout,
      /\[FAIL\] sidecar RBAC bare: its ServiceAccounts may not list services, watch services/,
    );
    assert.match(
      r.stdout,
      /fix: outrigger install --webhook-url https:\/\/127\.0\.0\.1:\d+ --namespaces bare \| kubectl apply -f -/,
    );
    const fix = sh(advisedInstall(r.stdout, 'sidecar RBAC bare'));
    assert.equal(fix.status, 0, fix.stderr);
    assert.match(fix.stdout, /clusterrolebinding\S*\/outrigger-sidecar-bare created/);
    assert.doesNotMatch(fix.stdout, /deployment/);
    assert.deepEqual(installed(), before, 'the same URL, caBundle and certificate');
    const after = await check();
    assert.equal(after.status, 0, after.stdout);
    assert.match(after.stdout, /\[ok\] +sidecar RBAC bare/);
    assert.match(createPod('p2'), /outrigger-proxy/, 'pods are still injected');
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

  test('check names near-miss opt-ins, pods without their sidecar, and strict pods without the issuer or trust bundle', async (t) => {
    if (!(await clusterFor(t))) return;
    const setup = sh(
      [
        `"$KUBECTL" create namespace near`,
        `"$KUBECTL" label namespace near outrigger.dev/injection=true`,
        `"$KUBECTL" create namespace noted`,
        `"$KUBECTL" annotate namespace noted outrigger.dev/injection=enabled`,
        // A pod created before its namespace opted in keeps running without a sidecar.
        `"$KUBECTL" create namespace late`,
        `printf 'apiVersion: v1\\nkind: Pod\\nmetadata: {name: old, namespace: late}\\nspec:\\n  containers: [{name: app, image: app}]\\n' | "$KUBECTL" apply -f -`,
        `"$KUBECTL" label namespace late outrigger.dev/injection=enabled`,
        `printf 'apiVersion: v1\\nkind: Pod\\nmetadata: {name: strict, namespace: shop, annotations: {outrigger.dev/mtls: strict}}\\nspec:\\n  containers: [{name: app, image: app}]\\n' | "$KUBECTL" apply -f -`,
      ].join(' && '),
    );
    assert.equal(setup.status, 0, setup.stderr);
    const r = await check();
    assert.equal(r.status, 1, r.stdout);
    assert.match(
      r.stdout,
      /\[warn\] namespace near: not opted in: label outrigger\.dev\/injection="true" is not "enabled"/,
    );
    assert.match(r.stdout, /fix: kubectl label namespace near outrigger\.dev\/injection=enabled --overwrite/);
    assert.match(
      r.stdout,
      /\[warn\] namespace noted: not opted in: outrigger\.dev\/injection is an annotation/,
    );
    assert.match(r.stdout, /\[warn\] pods late: 1 of 1 pod\(s\) run without a sidecar .*: old/);
    assert.match(r.stdout, /\[ok\] +pods shop: \d+ pod\(s\), each with its sidecar/);
    assert.match(
      r.stdout,
      /\[FAIL\] strict mTLS shop: 1 pod\(s\) with outrigger\.dev\/mtls: strict, but the identity issuer outrigger-system\/outrigger-identity has no available replica/,
    );
    assert.match(r.stdout, /\[FAIL\] strict mTLS shop: .*ConfigMap outrigger-trust-bundle is missing/);
    // The advised fix installs the issuer and keeps the rest of the install: the webhook URL and certificate.
    const before = installed();
    const fix = sh(advisedInstall(r.stdout, 'strict mTLS shop'));
    assert.equal(fix.status, 0, fix.stderr);
    assert.match(fix.stdout, /deployment\.apps\/outrigger-identity created/);
    assert.deepEqual(installed(), before);
    const undo = sh(
      [
        `"$KUBECTL" -n shop delete pod strict`,
        `"$KUBECTL" label namespace near outrigger.dev/injection-`,
        `"$KUBECTL" annotate namespace noted outrigger.dev/injection-`,
        `"$KUBECTL" label namespace late outrigger.dev/injection-`,
      ].join(' && '),
    );
    assert.equal(undo.status, 0, undo.stderr);
    const after = await check();
    assert.equal(after.status, 0, after.stdout);
    assert.doesNotMatch(after.stdout, /namespace near|namespace noted|pods late|strict mTLS/);
  });

  test('check fails for a stale caBundle and for an expired serving certificate; each fix keeps the URL', async (t) => {
    if (!(await clusterFor(t))) return;
    const now = Date.now();
    const before = installed();
    const other = makeCa('another-ca', { notBefore: new Date(now - DAY), notAfter: new Date(now + DAY) });
    setCaBundle(other.certPem);
    const stale = await check();
    assert.equal(stale.status, 1, stale.stdout);
    assert.match(
      stale.stdout,
      /\[FAIL\] caBundle: the serving certificate .* is not signed by the caBundle's CA \(CN=another-ca\)/,
    );
    assert.match(
      stale.stdout,
      /fix: outrigger install --webhook-url https:\/\/127\.0\.0\.1:\d+ \| kubectl apply -f -/,
    );
    const fixBundle = sh(advisedInstall(stale.stdout, 'caBundle'));
    assert.equal(fixBundle.status, 0, fixBundle.stderr);
    assert.deepEqual(installed(), before, "the Secret's CA is back in the caBundle");
    assert.equal((await check()).status, 0);

    // A certificate from the caBundle's CA whose validity ended yesterday.
    setCaBundle(other.certPem);
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
    assert.match(
      r.stdout,
      /fix: outrigger install --webhook-url https:\/\/127\.0\.0\.1:\d+ --rotate-certificate \| kubectl apply -f -, then restart the webhook/,
    );
    const rotate = sh(advisedInstall(r.stdout, 'certificate expiry'));
    assert.equal(rotate.status, 0, rotate.stderr);
    assert.match(rotate.stderr, /issuing a new webhook certificate \(--rotate-certificate\)/);
    const rotated = installed();
    assert.notEqual(rotated.crt, before.crt);
    assert.equal(rotated.url, before.url);
    await stopWebhook();
    await startWebhook(secretFile('tls.crt'), secretFile('tls.key'));
    const fixed = await check();
    assert.equal(fixed.status, 0, fixed.stdout);
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
    // The in-cluster form, asked for explicitly (a re-run alone keeps the URL): a Service whose
    // Deployment never became ready (no kubelet here).
    const apply = sh(`${cli} install --in-cluster-webhook | "$KUBECTL" apply -f -`);
    assert.equal(apply.status, 0, apply.stderr);
    assert.match(apply.stdout, /deployment\S*\/outrigger-webhook created/);
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

  test('check fails while the installed gateway has no ready replica, and says so no more once it is removed', async (t) => {
    if (!(await clusterFor(t))) return;
    const applied = sh(`"$KUBECTL" apply -k ${path.join(repoRoot, 'manifests/gateway')}`);
    assert.equal(applied.status, 0, applied.stderr);
    // This cluster has no node: the gateway's pods are never scheduled.
    const r = await check();
    assert.equal(r.status, 1, r.stdout);
    assert.match(r.stdout, /\[FAIL\] gateway: outrigger-gateway\/outrigger-gateway: 0\/2 replicas ready/);
    assert.match(r.stdout, /\[ok\] {3}gateway class: IngressClass outrigger/);
    // Its namespace stays (this cluster runs no namespace controller), labelled as opted out.
    const removed = sh(`"$KUBECTL" delete -k ${path.join(repoRoot, 'manifests/gateway')} --wait=false`);
    assert.equal(removed.status, 0, removed.stderr);
    assert.doesNotMatch((await check()).stdout, /gateway/);
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

  test('uninstall | kubectl delete -f - removes every object install made and no namespace of the user', async (t) => {
    if (!(await clusterFor(t))) return;
    // A binding to the sidecar role that install did not make: named, not deleted.
    assert.equal(
      sh(
        `"$KUBECTL" create clusterrolebinding mine --clusterrole=outrigger-sidecar --group=system:serviceaccounts:other`,
      ).status,
      0,
    );
    const file = path.join(dir, 'uninstall.yaml');
    const un = sh(`${cli} uninstall > ${file}`);
    assert.equal(un.status, 0, un.stderr);
    const text = readFileSync(file, 'utf8');
    assert.doesNotMatch(text, /tls\.key|^data:/m, 'no secret material');
    const kinds = parseAllDocuments(text).map((d) => {
      const o = d.toJS() as { kind: string; metadata: { name: string } };
      return `${o.kind}/${o.metadata.name}`;
    });
    assert.equal(kinds[0], 'MutatingWebhookConfiguration/outrigger-injector', 'the webhook goes first');
    assert.equal(kinds.at(-1), 'Namespace/outrigger-system');
    assert.deepEqual(
      kinds.filter((k) => k.startsWith('Namespace/')),
      ['Namespace/outrigger-system'],
    );
    for (const k of [
      'ClusterRoleBinding/outrigger-sidecar-shop',
      'ClusterRoleBinding/outrigger-sidecar-bare',
      'Secret/outrigger-webhook-tls',
      'Deployment/outrigger-webhook',
    ])
      assert.ok(kinds.includes(k), `${k} in ${kinds.join(', ')}`);
    assert.ok(!kinds.includes('ClusterRoleBinding/mine'));
    assert.match(un.stderr, /ClusterRoleBinding mine binds outrigger-sidecar/);
    const commands = printedCommands(un.stderr);
    assert.ok(commands.includes('kubectl label namespace shop outrigger.dev/injection-'), un.stderr);

    // --wait=false: no namespace controller runs here, so outrigger-system would never finish going.
    const del = sh(`"$KUBECTL" delete --wait=false -f ${file}`);
    assert.equal(del.status, 0, del.stderr);
    assert.match(
      del.stdout.split('\n')[0] ?? '',
      /mutatingwebhookconfiguration\S* "outrigger-injector" deleted/,
    );
    for (const c of commands) assert.equal(sh(c.replace(/^kubectl/, '"$KUBECTL"')).status, 0, c);
    assert.equal(sh(`"$KUBECTL" delete clusterrolebinding mine`).status, 0);

    const left = sh(
      `"$KUBECTL" get mutatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings,clusterroles,clusterrolebindings -l app.kubernetes.io/name=outrigger -o name && "$KUBECTL" -n outrigger-system get deployments,services,secrets,serviceaccounts,poddisruptionbudgets -o name`,
    );
    assert.equal(left.status, 0, left.stderr);
    assert.equal(left.stdout.trim(), '', 'no outrigger object is left');
    // No namespace controller runs here, so the namespace stays Terminating (empty) instead of going.
    const system = sh(
      `"$KUBECTL" get namespace outrigger-system -o jsonpath='{.metadata.deletionTimestamp}'`,
    );
    assert.ok(system.status !== 0 || system.stdout !== '', 'outrigger-system is being deleted');
    const shop = sh(`"$KUBECTL" get namespace shop -o jsonpath='{.metadata.labels}'`);
    assert.equal(shop.status, 0, 'namespace shop is still there');
    assert.doesNotMatch(shop.stdout, /outrigger\.dev\/injection/);
    assert.equal(createPod('p3'), 'pod/p3 created\n', 'a new pod in shop runs without a sidecar');

    const again = sh(`${cli} uninstall`);
    assert.equal(again.status, 0, again.stderr);
    assert.equal(again.stdout, '');
    assert.match(again.stderr, /nothing to delete/);
  });
});
