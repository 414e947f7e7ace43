// Mutual TLS between two netns "pods" with real sidecar processes, certificates from the issuer
// checked with the real TokenReview API (pod-bound TokenRequest tokens), 60 s certificates:
//   - the server sees the caller's SPIFFE id (header to the app, metric label); a plaintext caller
//     is refused by the strict pod, whose admin port still answers, including the app's probe
//     rewritten to it;
//   - steady traffic across several certificate rotations: zero failed requests;
//   - the issuer stopped, the client sidecar restarted: it serves mTLS from its stored identity.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { waitFor } from '../harness/discovery.ts';
import { createPod } from '../harness/mesh.ts';
import { issuerEnv } from '../harness/mesh-issuer.ts';
import { meshPod, startEchoApp } from '../harness/mesh-pods.ts';
import { createNetns, linkNetns, requireNetns, waitForPort } from '../harness/netns.ts';
import { repoRoot } from '../harness/tools.ts';

const CLIENT_IP = '10.77.0.1';
const SERVER_IP = '10.77.0.2';
const ROTATION_LOAD_MS = 75_000;

test('two meshed pods: mTLS with the caller identity, strict refuses plaintext, rotation and issuer outage lose nothing', async (t) => {
  if (!requireNetns(t)) return;
  const env = await issuerEnv(t, { rbac: true, ttlMs: 60_000, servingName: '127.0.0.1' });
  if (!env) return;
  const { admin, ns, trustBundle, running: issuer } = env;
  const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-mesh-e2e-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const issuerAddr = { host: '127.0.0.1', port: issuer.server.port };

  // Two pods, two service accounts, tokens bound to real Pod objects.
  const tokenFor = async (sa: string): Promise<string> => {
    await admin.createServiceAccount(ns, sa);
    await createPod(admin, ns, `${sa}-0`, sa);
    return admin.mintToken(ns, sa, { audiences: ['outrigger-identity'], boundPodName: `${sa}-0` });
  };
  const [webToken, apiToken] = [await tokenFor('web'), await tokenFor('api')];
  const nsA = await createNetns('meshc', { t });
  const nsB = await createNetns('meshs', { t });
  await linkNetns(nsA, nsB, { a: [`${CLIENT_IP}/24`], b: [`${SERVER_IP}/24`] });
  const clusterYaml = `apiVersion: v1
kind: Service
metadata: { name: api, namespace: prod }
spec: { ports: [{ name: http, port: 80, protocol: TCP }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: api-1, namespace: prod, labels: { kubernetes.io/service-name: api } }
addressType: IPv4
ports: [{ name: http, port: 8080, protocol: TCP }]
endpoints: [{ addresses: ["${SERVER_IP}"], conditions: { ready: true } }]
`;
  const client = await meshPod(
    nsA,
    CLIENT_IP,
    path.join(dir, 'web'),
    { token: webToken, trustBundle, clusterYaml },
    issuerAddr,
  );
  t.after(() => client.close());
  const server = await meshPod(
    nsB,
    SERVER_IP,
    path.join(dir, 'api'),
    { token: apiToken, trustBundle, clusterYaml: '' },
    issuerAddr,
  );
  t.after(() => server.close());
  // Explicit capture: the sidecar delivers to the app on localhost.
  startEchoApp(nsB, '0.0.0.0', 8080);
  await waitForPort(nsB, '127.0.0.1', 8080);
  // As the injector writes it under strict: the app's readiness probe, replayed on the admin port.
  const probes = JSON.stringify({ '/app-health/app/readyz': { port: 8080, path: '/' } });
  await server.startSidecar(['--mtls', 'strict', '--app-port', '8080', '--app-probes', probes]);
  await client.startSidecar(['--mtls', 'permissive', '--namespace', 'prod']);
  const identity = async (pod: typeof client) =>
    JSON.parse((await pod.admin('/debug/identity')).body) as {
      ready: boolean;
      source: string;
      renewals: number;
      renewalFailures: number;
    };
  await waitFor(
    'both identities',
    async () => (await identity(client)).ready && (await identity(server)).ready,
    30_000,
  );

  // 1. Meshed: the app behind the strict pod is told who called.
  const web = `spiffe://cluster.local/ns/${ns}/sa/web`;
  const api = `spiffe://cluster.local/ns/${ns}/sa/api`;
  const r = await client.get('http://api.prod/', { proxyPort: 7400 });
  assert.equal(r.status, 200, `${r.body}\n${client.output()}`);
  assert.deepEqual(JSON.parse(r.body), { xfcc: `By=${api};URI=${web}` });

  // 2. Plaintext from another pod to the strict pod's ingress: 403 with the code; its admin port
  // (where kubelet's probes go) still answers.
  const plain = await client.get(`http://${SERVER_IP}:7401/`, { host: 'api' });
  assert.equal(plain.status, 403);
  assert.equal(plain.headers['x-outrigger-error'], 'mesh_caller_denied');
  assert.equal((await client.get(`http://${SERVER_IP}:7402/readyz`)).status, 200);
  // A kubelet-style probe of the app, rewritten to the admin port, passes under strict.
  assert.equal((await client.get(`http://${SERVER_IP}:7402/app-health/app/readyz`)).status, 200);

  // The server's metrics count the meshed call under its caller, the refused plaintext one as
  // unauthenticated; the issuer counted the certificates it signed.
  const metrics = (await client.get(`http://${SERVER_IP}:7402/metrics`)).body;
  const sample = (labels: string): number =>
    Number(/ (\d+)$/.exec(metrics.split('\n').find((l) => l.includes(labels)) ?? '')?.[1] ?? 0);
  assert.equal(sample(`direction="ingress",service="",caller="${ns}/web",status="200"`), 1, metrics);
  assert.equal(sample(`caller="unauthenticated",status="403",error="mesh_caller_denied"`), 1, metrics);
  assert.ok((await env.metric('outrigger_issuer_certificates_issued_total')) >= 2);

  // 3. Steady traffic across rotations of 60 s certificates (renewed every ~40 s): nothing fails.
  const before = await identity(client);
  const load = await nsA.exec(
    [
      process.execPath,
      path.join(repoRoot, 'test/harness/data-path-load.ts'),
      '7400',
      '50',
      String(ROTATION_LOAD_MS),
      'http://api.prod/',
    ],
    { timeoutMs: ROTATION_LOAD_MS + 60_000 },
  );
  const summary = JSON.parse(load.stdout) as { total: number; failed: number; failures: unknown[] };
  assert.ok(summary.total > 100, `load ran: ${summary.total}`);
  assert.equal(summary.failed, 0, JSON.stringify(summary.failures.slice(0, 5)));
  const after = await identity(client);
  assert.ok(
    after.renewals > before.renewals,
    `renewed during the load: ${before.renewals} -> ${after.renewals}`,
  );
  assert.ok((await identity(server)).renewals >= 2);
  t.diagnostic(
    `${summary.total} requests over ${ROTATION_LOAD_MS / 1000} s, ${summary.failed} failed; client certificates obtained ${before.renewals} -> ${after.renewals}`,
  );

  // 4. The issuer goes away; the client sidecar restarts: it serves mTLS from its stored identity.
  await issuer.close();
  await client.killSidecar();
  await client.startSidecar(['--mtls', 'permissive', '--namespace', 'prod']);
  const restarted = await identity(client);
  assert.equal(restarted.source, 'stored', client.output());
  assert.equal(restarted.ready, true);
  const again = await client.get('http://api.prod/', { proxyPort: 7400 });
  assert.equal(again.status, 200, again.body);
  assert.deepEqual(JSON.parse(again.body), { xfcc: `By=${api};URI=${web}` });
});
