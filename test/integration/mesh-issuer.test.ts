import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { issuerClient } from '../../src/mesh/issuer-client.ts';
import { WorkloadIdentity } from '../../src/mesh/workload-identity.ts';
import { createCsr, generateP256 } from '../../src/mesh/x509.ts';
import { systemClock, systemRandom } from '../../src/shared/clock.ts';
import { createLogger } from '../../src/shared/log.ts';
import { startCluster } from '../harness/cluster.ts';
import { issuerEnv } from '../harness/mesh-issuer.ts';
import { waitFor } from '../harness/discovery.ts';
import { repoRoot, requireTool, testBinaries } from '../harness/tools.ts';
import { createPod, expiredCopy, generateMeshCa } from '../harness/mesh.ts';

const SERVING_NAME = 'outrigger-identity.test';
const log = createLogger({ write: () => {} });

test('the issuer signs for pod-bound tokens checked with the real TokenReview API, and nothing else', async (t) => {
  const env = await issuerEnv(t, { rbac: true });
  if (!env) return;
  const { cluster, admin, ns, post, trustBundle, ca, metric } = env;

  await admin.createServiceAccount(ns, 'web');
  await createPod(admin, ns, 'web-0', 'web');
  const id = `spiffe://cluster.local/ns/${ns}/sa/web`;
  const keys = await generateP256();
  const csr = await createCsr(keys, id);
  const token = await admin.mintToken(ns, 'web', {
    audiences: ['outrigger-identity'],
    boundPodName: 'web-0',
  });

  // A valid token: a certificate for exactly the token's service account, chaining to the root.
  const ok = await post(token, csr);
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  const cert = new X509Certificate(ok.body.certificate as string);
  assert.equal(cert.subjectAltName, `URI:${id}`);
  assert.ok(cert.publicKey.equals(keys.publicKey));
  const intermediate = new X509Certificate(readFileSync(ca.certFile, 'utf8'));
  const root = new X509Certificate(trustBundle);
  assert.deepEqual(
    (ok.body.chain as string[]).map((pem) => new X509Certificate(pem).fingerprint256),
    [intermediate.fingerprint256],
    'sent with the intermediate, not the root',
  );
  assert.ok(cert.checkIssued(intermediate) && cert.verify(intermediate.publicKey));
  assert.ok(intermediate.verify(root.publicKey));
  const lifetime = Date.parse(cert.validTo) - Date.parse(cert.validFrom);
  assert.ok(
    Math.abs(lifetime - (24 * 3600_000 + 20_000)) < 2_000,
    `24 h (+20 s backdating), got ${lifetime} ms`,
  );

  // A token for another audience (the API server's own): no certificate.
  const apiToken = await admin.mintToken(ns, 'web', { boundPodName: 'web-0' });
  const wrongAud = await post(apiToken, csr);
  assert.equal(wrongAud.status, 401);
  assert.equal(wrongAud.code, 'identity_token_rejected');
  assert.equal(wrongAud.body.certificate, undefined);

  // The same valid token, expired: no certificate.
  const expired = await post(expiredCopy(token, join(cluster.pkiDir, 'sa.key')), csr);
  assert.equal(expired.status, 401);
  assert.equal(expired.code, 'identity_token_rejected');
  assert.match(String(expired.body.message), /expired/i);

  // A token asking for another service account's identity: forbidden.
  const stolen = await post(token, await createCsr(keys, `spiffe://cluster.local/ns/${ns}/sa/admin`));
  assert.equal(stolen.status, 403);
  assert.equal(stolen.code, 'identity_forbidden');

  // No token at all, or a malformed CSR.
  assert.equal((await post(undefined, csr)).code, 'identity_token_rejected');
  const bad = await post(token, 'not a csr');
  assert.equal(bad.status, 400);
  assert.equal(bad.code, 'identity_request_invalid');

  // A token bound to a pod that has been deleted dies with it (TokenReview, unlike offline JWT checks).
  // The API server caches successful token authentications for a few seconds: poll until it forgets.
  await admin.delete('Pod', 'web-0', ns);
  // Certificates issued while the API server still remembered the pod (counted in the metrics below).
  let cached = 0;
  const retry = async () => {
    const r = await post(token, csr);
    if (r.status === 200) cached++;
    return r;
  };
  let gone = await retry();
  await waitFor('the deleted pod to invalidate its token', async () => {
    gone = await retry();
    return gone.status !== 200;
  });
  assert.equal(gone.status, 401);
  assert.equal(gone.code, 'identity_token_rejected');

  // The issuer's /metrics: every outcome above under its reason.
  const refusals = 'outrigger_issuer_refusals_total';
  assert.equal(await metric('outrigger_issuer_certificates_issued_total'), 1 + cached);
  assert.equal(await metric(refusals, 'reason="bad_audience"'), 1);
  assert.equal(await metric(refusals, 'reason="token_expired"'), 1);
  assert.equal(await metric(refusals, 'reason="csr_identity_mismatch"'), 1);
  assert.equal(await metric(refusals, 'reason="token_missing"'), 1);
  assert.equal(await metric(refusals, 'reason="request_invalid"'), 1);
  assert.ok((await metric(refusals, 'reason="token_not_authenticated"')) >= 1, 'the deleted pod');
  assert.ok((await metric('outrigger_issuer_token_review_duration_seconds_count')) >= 5);
  assert.equal(await metric('outrigger_issuer_token_review_errors_total', 'code="kube_unavailable"'), 0);
  const caExpiry = await metric('outrigger_issuer_ca_expiry_timestamp_seconds');
  assert.equal(caExpiry, Date.parse(intermediate.validTo) / 1000);
  assert.equal(
    await metric('outrigger_issuer_trust_bundle_expiry_timestamp_seconds'),
    Date.parse(root.validTo) / 1000,
  );
});

test('an issuer without RBAC for tokenreviews answers 503, never a certificate', async (t) => {
  const env = await issuerEnv(t, {
    rbac: false,
    issuer: { bundleNamespaces: 'outrigger.dev/injection=enabled' },
  });
  if (!env) return;
  const { admin, ns, post } = env;
  await admin.createServiceAccount(ns, 'web');
  await createPod(admin, ns, 'web-0', 'web');
  const token = await admin.mintToken(ns, 'web', {
    audiences: ['outrigger-identity'],
    boundPodName: 'web-0',
  });
  const res = await post(
    token,
    await createCsr(await generateP256(), `spiffe://cluster.local/ns/${ns}/sa/web`),
  );
  assert.equal(res.status, 503);
  assert.equal(res.code, 'identity_review_unavailable');
  assert.match(String(res.body.message), /403/);
  assert.equal(await env.metric('outrigger_issuer_refusals_total', 'reason="review_unavailable"'), 1);
  assert.equal(await env.metric('outrigger_issuer_token_review_errors_total', 'code="kube_forbidden"'), 1);
  // Nor may it distribute the trust bundle: counted, and no crash.
  await waitFor(
    'a failed distribution round',
    async () => (await env.metric('outrigger_issuer_trust_bundle_sync_failures_total')) >= 1,
  );
  assert.match(env.running.distributor?.view().lastError ?? '', /403/);
});

test('manifests/identity and the CA manifests of gen-mesh-ca pass server-side dry-run', async (t) => {
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
  const cluster = await startCluster(t);
  if (!cluster) return;
  t.after(() => cluster.stop());
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-mesh-ca-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  generateMeshCa(dir);
  const kubectlRun = (...args: string[]) => {
    const r = spawnSync(kubectl, ['--kubeconfig', cluster.kubeconfigPath, ...args], {
      cwd: repoRoot,
      encoding: 'utf8',
    });
    return { status: r.status, out: `${r.stdout}${r.stderr}` };
  };
  assert.equal(kubectlRun('apply', '-f', 'manifests/namespace.yaml').status, 0);
  const identity = kubectlRun('apply', '--dry-run=server', '-k', 'manifests/identity');
  assert.equal(identity.status, 0, identity.out);
  for (const kind of ['deployment.apps', 'poddisruptionbudget.policy', 'clusterrole.rbac', 'service/'])
    assert.ok(identity.out.includes(kind), `${kind} in:\n${identity.out}`);
  const ca = kubectlRun('apply', '--dry-run=server', '-f', join(dir, 'manifests.yaml'));
  assert.equal(ca.status, 0, ca.out);
  assert.match(ca.out, /secret\/outrigger-identity-ca/);
  assert.match(ca.out, /configmap\/outrigger-trust-bundle/);

  // A pod asking for mutual TLS, injected: the identity token, emptyDir and trust volumes validate.
  const pod = [
    'apiVersion: v1',
    'kind: Pod',
    'metadata: {name: web, namespace: default, annotations: {outrigger.dev/mtls: strict}}',
    'spec: {containers: [{name: app, image: example.invalid/app:1, ports: [{name: http, containerPort: 8080}],',
    '  readinessProbe: {httpGet: {path: /ready, port: http}}, livenessProbe: {tcpSocket: {port: 8080}},',
    '  startupProbe: {grpc: {port: 9090, service: shop.Cart}, timeoutSeconds: 3}}]}',
  ].join('\n');
  const injected = spawnSync(process.execPath, [join(repoRoot, 'src/main.ts'), 'inject', '-f', '-'], {
    input: pod,
    encoding: 'utf8',
  });
  assert.equal(injected.status, 0, injected.stderr);
  assert.match(injected.stdout, /audience: outrigger-identity/);
  assert.match(injected.stdout, /path: \/app-health\/app\/readyz/);
  // The gRPC probe too, as an HTTP probe of the admin port (the API server below accepts one handler).
  assert.match(injected.stdout, /path: \/app-health\/app\/startupz/);
  assert.doesNotMatch(injected.stdout, /^\s+grpc:/m);
  const r = spawnSync(
    kubectl,
    ['--kubeconfig', cluster.kubeconfigPath, 'apply', '--dry-run=server', '-f', '-'],
    {
      input: injected.stdout,
      encoding: 'utf8',
    },
  );
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
});

test('a sidecar identity from the real issuer survives a sidecar restart while the issuer is down', async (t) => {
  const env = await issuerEnv(t, { rbac: true });
  if (!env) return;
  const { admin, ns, trustBundle, running, url } = env;
  await admin.createServiceAccount(ns, 'web');
  await createPod(admin, ns, 'web-0', 'web');
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-sidecar-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const tokenFile = join(dir, 'token');
  writeFileSync(
    tokenFile,
    await admin.mintToken(ns, 'web', { audiences: ['outrigger-identity'], boundPodName: 'web-0' }),
  );
  const sidecar = () => {
    const id = new WorkloadIdentity({
      trustDomain: 'cluster.local',
      tokenFile,
      storeDir: join(dir, 'emptydir'),
      request: issuerClient({ url, trustBundle: () => trustBundle, servername: SERVING_NAME }),
      clock: systemClock,
      random: systemRandom,
      log,
    });
    t.after(() => id.close());
    return id;
  };
  const first = sidecar();
  await first.start();
  const issued = first.current();
  assert.ok(issued, JSON.stringify(first.status()));
  assert.equal(first.status().spiffeId, `spiffe://cluster.local/ns/${ns}/sa/web`);
  first.close();

  await running.close(); // the issuer is down
  const restarted = sidecar();
  await restarted.start();
  assert.equal(restarted.status().source, 'stored');
  assert.equal(restarted.current()?.certificate, issued.certificate);
  assert.equal(restarted.status().ready, true);
});
