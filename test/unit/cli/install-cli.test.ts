// `outrigger install` offline: what it prints, checked object by object (the real apply is in
// test/integration/cli-install-check.test.ts).
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { runCli } from '../../harness/cli.ts';

interface Container {
  image: string;
  env: { name: string; value?: string }[];
}
interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  spec?: { template: { spec: { containers: Container[] } } };
  webhooks?: { clientConfig: { caBundle: string } }[];
}

test('install prints the control plane with a fresh certificate that matches its caBundle', async () => {
  const r = await runCli([
    'install',
    '--namespaces',
    'shop,web',
    '--image',
    'registry.example/outrigger:1.2',
  ]);
  assert.equal(r.status, 0, r.stderr);
  const objs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
  const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`);
  assert.equal(
    kinds.at(-1),
    'MutatingWebhookConfiguration/outrigger-injector',
    'the webhook configuration comes last',
  );
  for (const k of [
    'Namespace/shop',
    'Namespace/web',
    'Namespace/outrigger-system',
    'Secret/outrigger-webhook-tls',
    'Deployment/outrigger-webhook',
    'ClusterRole/outrigger-sidecar',
    'ClusterRoleBinding/outrigger-sidecar-shop',
    'ClusterRoleBinding/outrigger-sidecar-web',
  ])
    assert.ok(kinds.includes(k), `${k} in ${kinds.join(', ')}`);
  assert.ok(!kinds.includes('ClusterRoleBinding/outrigger-sidecar-demo'), 'the example binding is replaced');
  assert.equal(
    objs.find((o) => o.metadata.name === 'shop')?.metadata.labels?.['outrigger.dev/injection'],
    'enabled',
  );

  const secret = objs.find((o) => o.kind === 'Secret');
  const cert = new X509Certificate(Buffer.from(secret?.data?.['tls.crt'] ?? '', 'base64'));
  const config = objs.find((o) => o.kind === 'MutatingWebhookConfiguration');
  const bundles = new Set((config?.webhooks ?? []).map((w) => w.clientConfig.caBundle));
  assert.equal(bundles.size, 1, 'one caBundle for the three webhooks');
  const ca = new X509Certificate(Buffer.from([...bundles][0] ?? '', 'base64'));
  assert.ok(
    cert.checkIssued(ca) && cert.verify(ca.publicKey),
    'the serving certificate is signed by the caBundle CA',
  );
  assert.match(cert.subjectAltName ?? '', /DNS:outrigger-webhook\.outrigger-system\.svc\b/);
  assert.ok(Date.parse(cert.validTo) - Date.now() > 360 * 86_400_000);

  const container = objs.find((o) => o.kind === 'Deployment')?.spec?.template.spec.containers[0];
  assert.equal(container?.image, 'registry.example/outrigger:1.2');
  assert.equal(
    container?.env.find((e) => e.name === 'OUTRIGGER_PROXY_IMAGE')?.value,
    'registry.example/outrigger:1.2',
  );

  const again = await runCli(['install', '--namespaces', 'shop']);
  assert.notEqual(
    again.stdout.match(/tls\.crt: (\S+)/)?.[1],
    r.stdout.match(/tls\.crt: (\S+)/)?.[1],
    'every run makes a new certificate',
  );
});

test('install checks its flags, and says when it binds no namespace', async () => {
  const bad = await runCli(['install', '--namespaces', 'Shop_1']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--namespaces: "Shop_1" is not a namespace name/);
  const http = await runCli(['install', '--webhook-url', 'http://127.0.0.1:8443']);
  assert.equal(http.status, 2);
  assert.match(http.stderr, /--webhook-url.*expected an https:\/\/ URL/);
  const none = await runCli(['install']);
  assert.equal(none.status, 0, none.stderr);
  assert.match(
    none.stderr,
    /no namespace is opted in yet, so no sidecar RBAC is included; name them with --namespaces/,
  );
});
