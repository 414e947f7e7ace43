// Every shipped manifest, and what `outrigger inject` prints, passes `kubectl apply --dry-run=server`
// against the real API server (admission, validation and Pod Security included).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments, stringify } from 'yaml';
import { startCluster } from '../harness/cluster.ts';
import { makeWebhookCerts, opensslAvailable } from '../harness/injector.ts';
import { repoRoot, requireTool, testBinaries } from '../harness/tools.ts';

type Obj = { kind: string; metadata: { name: string; namespace?: string }; spec?: Record<string, unknown> };

const docsOf = (text: string): Obj[] => parseAllDocuments(text).map((d) => d.toJS() as Obj);

test('manifests and injected output pass server-side dry-run', async (t) => {
  const kubectl = testBinaries().kubectl;
  if (
    !requireTool(
      t,
      kubectl !== undefined && existsSync(kubectl),
      'kubectl',
      "run 'scripts/test-cluster build'",
    )
  )
    return;
  if (!requireTool(t, opensslAvailable(), 'openssl', 'install openssl (gen-webhook-certs uses it)')) return;
  const cluster = await startCluster(t);
  if (!cluster) return;
  t.after(() => cluster.stop());
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'outrigger-manifests-'));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));

  const run = (args: string[], input?: string) => {
    const r = spawnSync(kubectl, ['--kubeconfig', cluster.kubeconfigPath, ...args], {
      cwd: repoRoot,
      input,
      encoding: 'utf8',
    });
    return { status: r.status, out: `${r.stdout}${r.stderr}` };
  };
  const dryRun = (args: string[], input?: string) => {
    const r = run(['apply', '--dry-run=server', ...args], input);
    assert.equal(r.status, 0, r.out);
    return r.out;
  };

  // A dry-run Namespace is not created, so the namespaces the manifests use are created for real.
  const example = readFileSync(path.join(repoRoot, 'manifests/examples/app.yaml'), 'utf8');
  const jaeger = readFileSync(path.join(repoRoot, 'manifests/examples/jaeger.yaml'), 'utf8');
  for (const ns of [...docsOf(example), ...docsOf(jaeger)].filter((d) => d.kind === 'Namespace'))
    await cluster.admin.apply(ns);
  assert.equal(run(['apply', '-f', 'manifests/namespace.yaml']).status, 0);

  await t.test('kubectl apply -k manifests (webhook, PDB, RBAC, configuration)', () => {
    const out = dryRun(['-k', 'manifests']);
    for (const kind of [
      'deployment.apps',
      'poddisruptionbudget.policy',
      'mutatingwebhookconfiguration',
      'clusterrole',
    ])
      assert.match(
        out,
        new RegExp(`${kind.replaceAll('.', '\\.')}[^ ]* (created|configured|unchanged)`),
        kind,
      );
  });

  await t.test('kubectl apply -k manifests/examples (Jaeger, annotated app)', () => {
    dryRun(['-k', 'manifests/examples']);
  });

  await t.test('the overlay from gen-webhook-certs: TLS Secret and caBundle in every webhook entry', () => {
    const dir = path.join(tmp, 'overlay');
    const certs = makeWebhookCerts(dir, []);
    const built = run(['kustomize', dir]);
    assert.equal(built.status, 0, built.out);
    const objs = docsOf(built.out);
    assert.ok(objs.some((o) => o.kind === 'Secret' && o.metadata.name === 'outrigger-webhook-tls'));
    const mwc = objs.find((o) => o.kind === 'MutatingWebhookConfiguration') as unknown as {
      webhooks: { clientConfig: { caBundle?: string } }[];
    };
    assert.equal(mwc.webhooks.length, 3);
    for (const w of mwc.webhooks) assert.equal(w.clientConfig.caBundle, certs.caBundle);
    dryRun(['-k', dir]);
  });

  await t.test('outrigger inject -f manifests/examples/app.yaml is accepted', () => {
    const injected = spawnSync(
      process.execPath,
      ['src/main.ts', 'inject', '-f', 'manifests/examples/app.yaml'],
      {
        cwd: repoRoot,
        encoding: 'utf8',
      },
    );
    assert.equal(injected.status, 0, injected.stderr);
    const out = dryRun(['-f', '-'], injected.stdout);
    assert.match(out, /deployment\.apps\/hello (created|configured|unchanged) \(server dry run\)/);

    // Pod Security is enforced on Pods, not Deployments: check the pod the Deployment would create.
    const deployment = docsOf(injected.stdout).find((d) => d.kind === 'Deployment');
    const template = deployment?.spec?.template as { metadata: Record<string, unknown>; spec: unknown };
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { ...template.metadata, name: 'hello-pod', namespace: 'shop' },
      spec: template.spec,
    };
    const r = dryRun(['-f', '-'], stringify(pod));
    assert.match(r, /pod\/hello-pod created \(server dry run\)/);
  });

  await t.test('control: transparent mode in the restricted namespace is refused by Pod Security', () => {
    const injected = spawnSync(
      process.execPath,
      ['src/main.ts', 'inject', '-f', '-', '--pod-security', 'privileged', '-n', 'shop'],
      {
        cwd: repoRoot,
        encoding: 'utf8',
        input:
          'apiVersion: v1\nkind: Pod\nmetadata: {name: loose}\nspec: {containers: [{name: a, image: busybox}]}\n',
      },
    );
    assert.equal(injected.status, 0, injected.stderr);
    const r = run(['apply', '--dry-run=server', '-n', 'shop', '-f', '-'], injected.stdout);
    assert.notEqual(r.status, 0);
    assert.match(r.out, /violates PodSecurity "restricted:latest".*outrigger-init/s);
  });
});
