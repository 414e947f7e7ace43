// Mutual TLS between two netns "pods" with real sidecar processes, certificates from the issuer
// checked with the real TokenReview API (pod-bound TokenRequest tokens), 60 s certificates:
//   - the server sees the caller's SPIFFE id (header to the app, metric label) over HTTP/1.1,
//     gRPC and raw TCP; a wire tap between the pods sees nothing but TLS records;
//   - the strict pod (transparent capture) refuses plaintext HTTP, h2c/gRPC and TCP from another
//     pod; its admin port still answers, including the app's probe rewritten to it;
//   - steady traffic across several certificate rotations: zero failed requests;
//   - the issuer stopped, the client sidecar restarted: it serves mTLS from its stored identity.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { waitFor } from '../harness/discovery.ts';
import { createPod } from '../harness/mesh.ts';
import { issuerEnv } from '../harness/mesh-issuer.ts';
import { meshPod, onlyTlsRecords, startEchoApp } from '../harness/mesh-pods.ts';
import { createNetns, linkNetns, requireNetns, waitForPort } from '../harness/netns.ts';
import { repoRoot } from '../harness/tools.ts';
import { APP_UID, app as captureApp, main, node, PROXY_UID, tools } from '../harness/transparent-pods.ts';

const CLIENT_IP = '10.77.0.1';
const SERVER_IP = '10.77.0.2';
const ROTATION_LOAD_MS = 75_000;
const TAP_PORT = 17403;
const grpcLoad = path.join(repoRoot, 'test/harness/grpc-load.ts');
const grpcBackend = path.join(repoRoot, 'test/harness/grpc-backend.ts');

/** One line through a CONNECT tunnel of the egress listener (node's net, inside the pod). */
const connectScript = (target: string, line: string): string =>
  `const s=require('net').connect(7400,'127.0.0.1',()=>s.write('CONNECT ${target} HTTP/1.1\\r\\nHost: ${target}\\r\\n\\r\\n'));let o='',sent=false;s.setEncoding('latin1');s.on('data',d=>{o+=d;if(!sent&&o.includes('\\r\\n\\r\\n')){sent=true;s.write('${line}\\n')}});s.on('error',()=>{});s.on('close',()=>process.stdout.write(o));setTimeout(()=>s.destroy(),10000)`;

test('two meshed pods: mTLS with the caller identity, strict refuses plaintext, rotation and issuer outage lose nothing', async (t) => {
  if (!requireNetns(t, tools)) return;
  const env = await issuerEnv(t, { rbac: true, ttlMs: 60_000, servingName: '127.0.0.1' });
  if (!env) return;
  const { admin, ns, trustBundle, running: issuer } = env;
  const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-mesh-e2e-'));
  chmodSync(dir, 0o755); // the strict pod's sidecar runs as the proxy UID
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
spec:
  ports:
    - { name: http, port: 80, protocol: TCP }
    - { name: grpc, port: 9090, protocol: TCP, appProtocol: kubernetes.io/h2c }
    - { name: tcp, port: 9998, protocol: TCP }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: api-1, namespace: prod, labels: { kubernetes.io/service-name: api } }
addressType: IPv4
ports:
  - { name: http, port: 8080, protocol: TCP }
  - { name: grpc, port: 9090, protocol: TCP, appProtocol: kubernetes.io/h2c }
  - { name: tcp, port: 9998, protocol: TCP }
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
  // The strict pod runs transparent capture, as injected: every inbound port but the admin and
  // mesh ports goes to its sidecar. Its apps: HTTP (8080), gRPC (9090), raw TCP (9998).
  startEchoApp(nsB, '0.0.0.0', 8080);
  nsB.spawn([node, grpcBackend, '0.0.0.0:9090']);
  nsB.spawn([node, captureApp, 'serve', 'api', '', '9998']);
  for (const port of [8080, 9090, 9998]) await waitForPort(nsB, '127.0.0.1', port);
  await nsB.exec([node, main, 'iptables', '--proxy-uid', String(PROXY_UID)]);
  // As the injector writes it under strict: the app's readiness probe, replayed on the admin port.
  const probes = JSON.stringify({ '/app-health/app/readyz': { port: 8080, path: '/' } });
  await server.startSidecar(
    ['--mtls', 'strict', '--capture', 'transparent', '--app-port', '8080', '--app-probes', probes],
    { uid: PROXY_UID },
  );
  // A wire tap in the client pod: its sidecar's connections to the server's mesh port go through
  // a relay (as another user, so its own connection is not redirected) that keeps what it relays.
  const wire = path.join(dir, 'wire');
  mkdirSync(wire, { mode: 0o777 });
  chmodSync(wire, 0o777);
  nsA.spawn(
    [node, path.join(repoRoot, 'test/harness/wire-tap.ts'), String(TAP_PORT), SERVER_IP, '7403', wire],
    {
      uid: APP_UID,
      gid: APP_UID,
    },
  );
  await waitForPort(nsA, '127.0.0.1', TAP_PORT);
  await nsA.exec(
    ['iptables', '-t', 'nat', '-A', 'OUTPUT', '-p', 'tcp', '-d', SERVER_IP, '--dport', '7403'].concat([
      '-m',
      'owner',
      '!',
      '--uid-owner',
      String(APP_UID),
      '-j',
      'REDIRECT',
      '--to-ports',
      String(TAP_PORT),
    ]),
  );
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

  // 3. gRPC over mTLS (ALPN h2): the server app is told who called; every call succeeds.
  const caller = `By=${api};URI=${web}`;
  const grpcRun = async (mode: string, target: string, n: number) =>
    JSON.parse(
      (await nsA.exec([node, grpcLoad, mode, '7400', target, String(n), '0', '0'], { timeoutMs: 60_000 }))
        .stdout,
    ) as { failed: number; failures: { code: number; details: string }[]; callers: Record<string, number> };
  const meshedGrpc = await grpcRun('direct', 'api.prod:9090', 20);
  assert.equal(meshedGrpc.failed, 0, JSON.stringify(meshedGrpc.failures));
  assert.deepEqual(meshedGrpc.callers, { [caller]: 20 });
  // Plaintext h2c from a non-meshed client straight to the strict pod: PERMISSION_DENIED.
  const plainGrpc = await grpcRun('plain', `${SERVER_IP}:9090`, 1);
  assert.equal(plainGrpc.failures[0]?.code, 7, JSON.stringify(plainGrpc));
  assert.match(plainGrpc.failures[0]?.details ?? '', /mutual TLS only/);

  // 4. Raw TCP over mTLS (ALPN outrigger-tcp), through a CONNECT tunnel of the client's sidecar;
  // plaintext TCP from the client pod straight to the strict pod gets no answer.
  const tunnel = await nsA.exec([node, '-e', connectScript('api.prod:9998', 'hello-over-mtls')]);
  assert.match(tunnel.stdout, /^HTTP\/1\.1 200 Connection Established\r\n\r\nPONG api hello-over-mtls\n$/);
  const plainTcp = await nsA.exec([node, captureApp, 'tcp', SERVER_IP, '9998', 'hello-plaintext'], {
    allowFail: true,
  });
  assert.doesNotMatch(plainTcp.stdout, /PONG/);
  const mesh = JSON.parse((await server.admin('/debug/mesh')).body) as {
    inbound: { protocols: Record<string, number> };
  };
  assert.ok((mesh.inbound.protocols.h2 ?? 0) >= 1, JSON.stringify(mesh));
  assert.ok((mesh.inbound.protocols['outrigger-tcp'] ?? 0) >= 1, JSON.stringify(mesh));
  // Between the pods: TLS records and nothing else, on every connection.
  const taps = readdirSync(wire).map((f) => readFileSync(path.join(wire, f)));
  assert.ok(taps.length >= 3, `connections tapped: ${taps.length}`);
  for (const bytes of taps)
    assert.ok(onlyTlsRecords(bytes), `not TLS: ${bytes.subarray(0, 32).toString('hex')}`);

  // 5. Steady traffic across rotations of 60 s certificates (renewed every ~40 s): nothing fails.
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

  // 6. The issuer goes away; the client sidecar restarts: it serves mTLS from its stored identity.
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
