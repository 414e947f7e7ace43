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
  assert.deepEqual(
    kinds.filter((k) => k.startsWith('Namespace/')),
    ['Namespace/outrigger-system'],
    'no namespace of the user, so kubectl delete -f - of this output cannot delete one',
  );
  assert.match(
    r.stderr,
    /opt them in with:\n {2}kubectl label namespace shop outrigger\.dev\/injection=enabled\n {2}kubectl label namespace web outrigger\.dev\/injection=enabled\n/,
  );
  for (const k of [
    'Namespace/outrigger-system',
    'Secret/outrigger-webhook-tls',
    'Deployment/outrigger-webhook',
    'ClusterRole/outrigger-sidecar',
    'ClusterRoleBinding/outrigger-sidecar-shop',
    'ClusterRoleBinding/outrigger-sidecar-web',
  ])
    assert.ok(kinds.includes(k), `${k} in ${kinds.join(', ')}`);
  assert.ok(!kinds.includes('ClusterRoleBinding/outrigger-sidecar-demo'), 'the example binding is replaced');

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
    'without a cluster to read, every run makes a new certificate',
  );
  assert.match(again.stderr, /no kubeconfig, so this is a fresh install with a new CA/);
});

test('uninstall without a cluster lists what install makes, webhook configuration first, no data and no user namespace', async () => {
  const r = await runCli(['uninstall', '--namespaces', 'shop']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /Delete with: kubectl delete --ignore-not-found -f -/);
  const objs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj & Record<string, unknown>);
  const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`);
  assert.deepEqual(kinds.slice(0, 4), [
    'MutatingWebhookConfiguration/outrigger-injector',
    'ValidatingAdmissionPolicyBinding/outrigger-sidecar-required',
    'ValidatingAdmissionPolicy/outrigger-sidecar-required',
    'ClusterRoleBinding/outrigger-sidecar-shop',
  ]);
  assert.equal(kinds.at(-1), 'Namespace/outrigger-system');
  // The gateway's namespace is one install --gateway makes; never a user's.
  assert.deepEqual(
    kinds.filter((k) => k.startsWith('Namespace/')),
    ['Namespace/outrigger-gateway', 'Namespace/outrigger-system'],
  );
  for (const k of [
    'Deployment/outrigger-gateway',
    'IngressClass/outrigger',
    'Secret/outrigger-webhook-tls',
    'Deployment/outrigger-webhook',
    'ClusterRole/outrigger-sidecar',
  ])
    assert.ok(kinds.includes(k), `${k} in ${kinds.join(', ')}`);
  for (const o of objs)
    assert.deepEqual(Object.keys(o).sort(), ['apiVersion', 'kind', 'metadata'], 'names only');
  assert.match(r.stderr, /^ {2}kubectl label namespace shop outrigger\.dev\/injection-$/m);
});

test('install --gateway adds the gateway on the same image, before the webhook configuration; without it there is none', async () => {
  const image = 'registry.example/outrigger:1.2';
  const r = await runCli(['install', '--gateway', '--image', image]);
  assert.equal(r.status, 0, r.stderr);
  const objs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
  const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`);
  for (const k of [
    'Namespace/outrigger-gateway',
    'Deployment/outrigger-gateway',
    'Service/outrigger-gateway',
    'IngressClass/outrigger',
    'ClusterRole/outrigger-gateway',
  ])
    assert.ok(kinds.includes(k), `${k} in ${kinds.join(', ')}`);
  assert.equal(kinds.at(-1), 'MutatingWebhookConfiguration/outrigger-injector');
  const gateway = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'outrigger-gateway');
  assert.deepEqual(
    gateway?.spec?.template.spec.containers.map((c) => c.image),
    [image],
  );
  const plain = await runCli(['install', '--image', image]);
  assert.doesNotMatch(plain.stdout, /outrigger-gateway/);
  // A webhook called by URL drops the in-cluster webhook's workloads, not the gateway's.
  const byUrl = await runCli(['install', '--gateway', '--webhook-url', 'https://10.0.0.1:8443']);
  assert.equal(byUrl.status, 0, byUrl.stderr);
  const byUrlKinds = parseAllDocuments(byUrl.stdout).map((d) => {
    const o = d.toJS() as Obj;
    return `${o.kind}/${o.metadata.name}`;
  });
  assert.ok(byUrlKinds.includes('Deployment/outrigger-gateway'));
  assert.ok(!byUrlKinds.includes('Deployment/outrigger-webhook'));
});

test("install --gateway-api adds the gateway with Gateway API on: its argument, RBAC (the Gateways' Services too) and GatewayClass", async () => {
  const r = await runCli(['install', '--gateway-api']);
  assert.equal(r.status, 0, r.stderr);
  const objs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
  const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`);
  for (const k of [
    'Deployment/outrigger-gateway',
    'ClusterRole/outrigger-gateway-api',
    'Role/outrigger-gateway-services',
    'RoleBinding/outrigger-gateway-services',
    'GatewayClass/outrigger',
  ])
    assert.ok(kinds.includes(k), `${k} in ${kinds.join(', ')}`);
  // The Gateways' Services: made in the gateway's own namespace only, never deleted.
  const services = objs.find((o) => o.kind === 'Role' && o.metadata.name === 'outrigger-gateway-services') as
    (Obj & { rules: { resources: string[]; verbs: string[] }[] }) | undefined;
  assert.equal(services?.metadata.namespace, 'outrigger-gateway');
  assert.deepEqual(services?.rules, [
    { apiGroups: [''], resources: ['services'], verbs: ['get', 'create', 'patch'] },
  ]);
  const gateway = objs.find(
    (o) => o.kind === 'Deployment' && o.metadata.name === 'outrigger-gateway',
  ) as unknown as {
    spec: { template: { spec: { containers: { args: string[] }[] } } };
  };
  assert.equal(
    gateway.spec.template.spec.containers[0]!.args.filter((a) => a === '--gateway-api=true').length,
    1,
  );
  assert.match(r.stderr, /standard-channel CRDs/);
  const plain = await runCli(['install', '--gateway']);
  assert.doesNotMatch(plain.stdout, /gateway-api|GatewayClass/);
});

test('install --gateway-mtls makes the gateway a mesh client: its argument, and the trust bundle it reads', async () => {
  const r = await runCli(['install', '--gateway-mtls']);
  assert.equal(r.status, 0, r.stderr);
  const objs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
  const gateway = objs.find(
    (o) => o.kind === 'Deployment' && o.metadata.name === 'outrigger-gateway',
  ) as unknown as {
    spec: { template: { spec: { containers: { args: string[] }[]; volumes: { name: string }[] } } };
  };
  assert.ok(gateway, 'the gateway is implied');
  assert.deepEqual(
    gateway.spec.template.spec.containers[0]!.args.filter((a) => a.startsWith('--mtls')),
    ['--mtls=on'],
  );
  const bundle = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'outrigger-trust-bundle') as
    (Obj & { metadata: { namespace: string; labels: Record<string, string> } }) | undefined;
  assert.equal(bundle?.metadata.namespace, 'outrigger-gateway');
  assert.equal(
    bundle.metadata.labels['app.kubernetes.io/managed-by'],
    'outrigger-identity',
    'kept by the issuer',
  );
  assert.match(r.stderr, /certificate comes from outrigger identity/);
  const plain = await runCli(['install', '--gateway']);
  assert.doesNotMatch(plain.stdout, /--mtls=on/);
});

test('install checks its flags, and says when it binds no namespace', async () => {
  const bad = await runCli(['install', '--namespaces', 'Shop_1']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--namespaces: "Shop_1" is not a namespace name/);
  const http = await runCli(['install', '--webhook-url', 'http://127.0.0.1:8443']);
  assert.equal(http.status, 2);
  assert.match(http.stderr, /--webhook-url.*expected an https:\/\/ URL/);
  const conflict = await runCli([
    'install',
    '--webhook-url',
    'https://127.0.0.1:8443',
    '--in-cluster-webhook',
  ]);
  assert.equal(conflict.status, 2);
  assert.match(conflict.stderr, /cannot be used with option '--in-cluster-webhook'/);
  const none = await runCli(['install']);
  assert.equal(none.status, 0, none.stderr);
  assert.match(
    none.stderr,
    /no namespace is opted in yet, so no sidecar RBAC is included; name them with --namespaces/,
  );
});

test('install --mesh-routes makes mesh routes the default of injected pods: the webhook gets the flag', async () => {
  type Args = {
    kind: string;
    metadata: { name: string };
    spec: { template: { spec: { containers: { args: string[] }[] } } };
  };
  const webhookArgs = (stdout: string): string[] | undefined =>
    parseAllDocuments(stdout)
      .map((d) => d.toJS() as Args)
      .find((o) => o.kind === 'Deployment' && o.metadata.name === 'outrigger-webhook')?.spec.template.spec
      .containers[0]?.args;
  const r = await runCli(['install', '--mesh-routes']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(
    webhookArgs(r.stdout)?.filter((a) => a.startsWith('--mesh-routes')),
    ['--mesh-routes=true'],
  );
  assert.match(r.stderr, /outrigger\.dev\/mesh-routes: "false"/);
  const plain = await runCli(['install']);
  assert.deepEqual(
    webhookArgs(plain.stdout)?.filter((a) => a.startsWith('--mesh-routes')),
    [],
  );
  const byUrl = await runCli(['install', '--mesh-routes', '--webhook-url', 'https://webhook.example:8443']);
  assert.equal(byUrl.status, 0, byUrl.stderr);
  assert.match(
    byUrl.stderr,
    /give the webhook you run at https:\/\/webhook\.example:8443 the flag --mesh-routes=true/,
  );
});
