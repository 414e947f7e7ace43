// The webhook against the real kube-apiserver: registered with a url clientConfig and the caBundle
// from scripts/gen-webhook-certs, using the selectors of the shipped MutatingWebhookConfiguration.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config/load.ts';
import { startWebhookServer } from '../../src/injector/server.ts';
import { injectorSettings } from '../../src/injector/settings.ts';
import type { Container, PodLike } from '../../src/injector/types.ts';
import { systemClock } from '../../src/shared/clock.ts';
import { memoryLogger } from '../harness/memory-logger.ts';
import { startCluster, type TestCluster } from '../harness/cluster.ts';
import {
  kubeRaw,
  makeWebhookCerts,
  opensslAvailable,
  rotateSecretDir,
  writeSecretDir,
  type RawReply,
} from '../harness/injector.ts';
import { KubeError } from '../harness/kube.ts';
import { repoRoot, requireTool } from '../harness/tools.ts';

type Pod = PodLike & { metadata: { name: string; annotations?: Record<string, string> } };
type Webhooks = { webhooks: { clientConfig: Record<string, unknown>; name: string }[] };

const RESTRICTED = { 'pod-security.kubernetes.io/enforce': 'restricted' };
const POLICY = 'manifests/webhook/sidecar-policy.yaml';
const POLICY_DENIAL = /outrigger-sidecar-required.*must carry the outrigger-proxy/;
const PLURAL: Record<string, string> = {
  ValidatingAdmissionPolicy: 'validatingadmissionpolicies',
  ValidatingAdmissionPolicyBinding: 'validatingadmissionpolicybindings',
};
const OPT_IN = { 'outrigger.dev/injection': 'enabled' };

/** A pod that meets the restricted standard on its own, so only the injector can make it fail. */
const appPod = (
  name: string,
  annotations: Record<string, string> = {},
  extra: Partial<PodLike['spec']> = {},
) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels: { app: name }, annotations },
  spec: {
    securityContext: { runAsNonRoot: true, runAsUser: 65534, seccompProfile: { type: 'RuntimeDefault' } },
    containers: [
      {
        name: 'app',
        image: 'registry.k8s.io/e2e-test-images/agnhost:2.53',
        ports: [{ containerPort: 8080 }],
        securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
      },
    ],
    ...extra,
  },
});

const names = (cs: Container[] | undefined): string[] => (cs ?? []).map((c) => c.name);

/** The shipped configuration, pointed at this process with a url clientConfig. */
function webhookConfig(port: number, caBundle: string): Webhooks & { metadata: { name: string } } {
  const file = path.join(repoRoot, 'manifests/webhook/mutatingwebhookconfiguration.yaml');
  const cfg = parse(readFileSync(file, 'utf8')) as Webhooks & { metadata: { name: string } };
  for (const w of cfg.webhooks) {
    const svc = w.clientConfig.service as { path: string };
    w.clientConfig = { url: `https://127.0.0.1:${port}${svc.path}`, caBundle };
  }
  return cfg;
}

test('the webhook injects pods through the real API server', async (t) => {
  if (!requireTool(t, opensslAvailable(), 'openssl', 'install openssl (gen-webhook-certs uses it)')) return;
  const cluster = await startCluster(t);
  if (!cluster) return;
  t.after(() => cluster.stop());
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'outrigger-inj-'));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const certs = makeWebhookCerts(path.join(tmp, 'certs'));
  writeSecretDir(path.join(tmp, 'tls'), { 'tls.crt': certs.certPem, 'tls.key': certs.keyPem });
  const log = memoryLogger('info');
  const server = await startWebhookServer({
    host: '127.0.0.1',
    port: 0,
    certFile: path.join(tmp, 'tls/tls.crt'),
    keyFile: path.join(tmp, 'tls/tls.key'),
    settings: injectorSettings(loadConfig({ env: {} }), 'outrigger-system'),
    log,
    clock: systemClock,
  });
  t.after(() => server.close());
  const { admin } = cluster;
  const meshed = await admin.createNamespace('meshed', OPT_IN);
  const plain = await admin.createNamespace('plain');
  const locked = await admin.createNamespace('locked', { ...OPT_IN, ...RESTRICTED });

  // The backstop policy first: until the webhook is registered it refuses un-injected pods, and
  // from then on every pod below has passed both the webhook and the policy.
  for (const doc of parseAllDocuments(readFileSync(path.join(repoRoot, POLICY), 'utf8'))) {
    const obj = doc.toJS() as { kind: string };
    await admin.request('POST', `/apis/admissionregistration.k8s.io/v1/${PLURAL[obj.kind]}`, obj);
  }
  await waitUntil(cluster, meshed, (r) => r.status === 403 && POLICY_DENIAL.test(JSON.stringify(r.body)));
  const config = webhookConfig(server.port, certs.caBundle);
  await admin.apply(config);
  await waitUntil(
    cluster,
    meshed,
    (r) => r.status === 201 && JSON.stringify(r.body).includes('outrigger-proxy'),
  );

  await t.test('a pod in an opted-in namespace is stored with the sidecar', async () => {
    const stored = await admin.apply<Pod>({
      ...appPod('web'),
      metadata: { ...appPod('web').metadata, namespace: meshed },
    });
    assert.deepEqual(names(stored.spec.initContainers), ['outrigger-init', 'outrigger-proxy']);
    assert.equal(stored.spec.initContainers?.[1]?.restartPolicy, 'Always');
    assert.deepEqual(names(stored.spec.containers), ['app']);
    assert.match(stored.metadata.annotations?.['outrigger.dev/injected'] ?? '', /"capture":"transparent"/);
    assert.ok(log.lines.some((l) => l.msg === 'sidecar injected' && l.namespace === meshed));
  });

  await t.test('an invalid annotation is rejected with the webhook message', async () => {
    const bad = appPod('bad', { 'outrigger.dev/trace-sampling': '2' });
    await assert.rejects(
      admin.apply({ ...bad, metadata: { ...bad.metadata, namespace: meshed } }),
      (e: unknown) =>
        e instanceof KubeError &&
        e.status === 400 &&
        e.message.includes(
          'admission webhook \\"inject.outrigger.dev\\" denied the request: invalid annotation outrigger.dev/trace-sampling=\\"2\\": expected a number from 0 to 1',
        ),
    );
  });

  await t.test('a CIDR with a zone index is rejected, not written into the iptables rules', async () => {
    const bad = appPod('zone', { 'outrigger.dev/exclude-inbound-cidrs': 'fe80::1%eth0/64' });
    await assert.rejects(
      admin.apply({ ...bad, metadata: { ...bad.metadata, namespace: meshed } }),
      (e: unknown) =>
        e instanceof KubeError &&
        e.status === 400 &&
        e.message.includes('denied the request: invalid annotation outrigger.dev/exclude-inbound-cidrs='),
    );
  });

  await t.test('a namespace that did not opt in is untouched', async () => {
    const stored = await admin.apply<Pod>({
      ...appPod('web'),
      metadata: { ...appPod('web').metadata, namespace: plain },
    });
    assert.equal(stored.spec.initContainers, undefined);
    assert.equal(stored.metadata.annotations?.['outrigger.dev/injected'], undefined);
  });

  await t.test('opted-out and hostNetwork pods are untouched', async () => {
    const out = appPod('optout', { 'outrigger.dev/inject': 'false' });
    const a = await admin.apply<Pod>({ ...out, metadata: { ...out.metadata, namespace: meshed } });
    assert.equal(a.spec.initContainers, undefined);
    const host = appPod('hostnet', {}, { hostNetwork: true });
    const b = await admin.apply<Pod>({ ...host, metadata: { ...host.metadata, namespace: plain } });
    assert.equal(b.spec.initContainers, undefined);
  });

  await t.test('re-applying an injected pod is idempotent', async () => {
    const first = await admin.get<Pod>('Pod', 'web', meshed);
    const again = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'web-again',
        namespace: meshed,
        labels: first.metadata.labels,
        annotations: first.metadata.annotations,
      },
      spec: first.spec,
    };
    const stored = await admin.apply<Pod>(again);
    assert.deepEqual(stored.spec.initContainers, first.spec.initContainers);
    assert.deepEqual(stored.spec.containers, first.spec.containers);
    assert.deepEqual(stored.spec.volumes, first.spec.volumes);
    const dry = await admin.apply<Pod>(
      { ...again, metadata: { ...again.metadata, name: 'web-dry' } },
      '?dryRun=All',
    );
    assert.deepEqual(names(dry.spec.initContainers), ['outrigger-init', 'outrigger-proxy']);
  });

  await t.test('a restricted namespace gets explicit mode, a warning, and passes Pod Security', async () => {
    const pod = appPod('strict');
    const r = await kubeRaw(
      cluster.server,
      cluster.caPem,
      cluster.adminToken,
      'POST',
      `/api/v1/namespaces/${locked}/pods`,
      {
        ...pod,
        metadata: { ...pod.metadata, namespace: locked },
      },
    );
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const stored = r.body as unknown as Pod;
    assert.deepEqual(names(stored.spec.initContainers), ['outrigger-proxy']);
    const env = stored.spec.containers[0]?.env ?? [];
    assert.ok(env.some((e) => e.name === 'HTTP_PROXY' && e.value === 'http://127.0.0.1:7400'));
    assert.match(r.warnings.join('\n'), /Pod Security "restricted".*using explicit capture/);
  });

  await t.test('control: the transparent-mode pod would be refused by Pod Security there', async () => {
    const injected = await admin.get<Pod>('Pod', 'web', meshed);
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'would-fail', namespace: locked, annotations: injected.metadata.annotations },
      spec: injected.spec,
    };
    await assert.rejects(
      admin.apply(pod, '?dryRun=All'),
      (e: unknown) =>
        e instanceof KubeError &&
        e.status === 403 &&
        /violates PodSecurity \\?"restricted.*outrigger-init.*NET_ADMIN/.test(e.message),
    );
  });

  await t.test('a rotated serving certificate is picked up while the API server keeps calling', async () => {
    const next = makeWebhookCerts(path.join(tmp, 'certs'));
    rotateSecretDir(path.join(tmp, 'tls'), { 'tls.crt': next.certPem, 'tls.key': next.keyPem });
    await server.reloadCertificate();
    assert.ok(log.lines.filter((l) => l.msg === 'serving certificate loaded').length >= 2);
    const pod = appPod('after-rotation');
    const stored = await admin.apply<Pod>({ ...pod, metadata: { ...pod.metadata, namespace: meshed } });
    assert.deepEqual(names(stored.spec.initContainers), ['outrigger-init', 'outrigger-proxy']);
  });

  await t.test(
    'with the webhook gone, the policy refuses un-injected pods but not opted-out ones',
    async () => {
      await admin.request(
        'DELETE',
        `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${config.metadata.name}`,
      );
      await waitUntil(cluster, meshed, (r) => r.status === 403 && POLICY_DENIAL.test(JSON.stringify(r.body)));
      const out = appPod('opted-out', { 'outrigger.dev/inject': 'false' });
      const stored = await admin.apply<Pod>({ ...out, metadata: { ...out.metadata, namespace: meshed } });
      assert.equal(stored.spec.initContainers, undefined);
    },
  );
});

/** Admission configuration takes effect asynchronously; dry-run a probe pod until it shows. */
async function waitUntil(
  cluster: TestCluster,
  namespace: string,
  done: (r: RawReply) => boolean,
): Promise<void> {
  const probe = appPod('probe');
  const body = { ...probe, metadata: { ...probe.metadata, namespace } };
  for (let i = 0; i < 100; i++) {
    const r = await kubeRaw(
      cluster.server,
      cluster.caPem,
      cluster.adminToken,
      'POST',
      `/api/v1/namespaces/${namespace}/pods?dryRun=All`,
      body,
    );
    if (done(r)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the admission configuration never took effect');
}
