// The product as a user deploys it, on a real node: `outrigger install` piped to kubectl (the
// webhook as an in-cluster Deployment, and the identity issuer with a mesh CA it makes), a labelled
// namespace, and a client and a server Deployment that the webhook injects. Every check reads the
// real objects (through the API server, the pod proxy included) and the real traffic.
//
// One cluster for the suite (a node takes 20-60 s to start): the node's own checks (pod-checks.ts)
// run in it too, while the token of the pod created first runs towards its renewal; `down` is last.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  createPodNamespace,
  nodeUnavailable,
  run,
  startNodeCluster,
  type ExecResult,
  type PodView,
  type TestNodeCluster,
} from '../harness/node.ts';
import { inCI, repoRoot, requireTool } from '../harness/tools.ts';
import { httpRoute, installGatewayApi } from '../harness/gateway-api.ts';
import { podChecks } from './pod-checks.ts';

const archive = process.env.OUTRIGGER_IMAGE_ARCHIVE ?? path.join(repoRoot, '.outrigger/images/outrigger.tar');
const version = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string })
  .version;
const image = `ghcr.io/outrigger-mesh/outrigger:${version}`;

const unavailable =
  nodeUnavailable() ??
  (existsSync(archive) ? undefined : `no image archive at ${archive}: run scripts/build-image`);
if (unavailable !== undefined && inCI) throw new Error(`CI=true and ${unavailable}`);

const cli = (args: string[], opts: { allowFail?: boolean; input?: string } = {}): Promise<ExecResult> =>
  run(process.execPath, [path.join(repoRoot, 'src/main.ts'), ...args], { timeoutMs: 120_000, ...opts });

/** The server answers with this body; the client calls it by the Service's DNS name. */
const BODY = 'hello-from-web';
/** A Service without mutual TLS that the client first calls during the API outage. */
const LEGACY = 'hello-from-legacy';

/** scripts/test-node/shop.yaml (the README's example), in the test's own namespace. */
function workloads(ns: string, busybox: string): string {
  const yaml = readFileSync(path.join(repoRoot, 'scripts/test-node/shop.yaml'), 'utf8');
  assert.ok(yaml.includes(`image: ${busybox}`), `shop.yaml runs the node's busybox image ${busybox}`);
  return yaml.replaceAll('namespace: shop }', `namespace: ${ns} }`);
}

describe('injected pods on a real node', { skip: unavailable, timeout: 900_000 }, () => {
  let c: TestNodeCluster;
  let hostRulesBefore: Set<string>;
  let ns: string;
  let other: string;
  /** A pod whose sidecar's token lives 600 s (the API's minimum), so the kubelet renews it here. */
  let rotor: { created: number };
  const kubectl = (args: string[], opts?: { allowFail?: boolean; input?: string }) =>
    c.kubectl(args, { timeoutMs: 120_000, ...opts });

  /** The one running, not terminating pod of a Deployment. */
  async function podOf(app: string): Promise<PodView> {
    const list = JSON.parse(
      (await kubectl(['-n', ns, 'get', 'pods', '-l', `app=${app}`, '-o', 'json'])).stdout,
    ) as {
      items: (PodView & { metadata: { deletionTimestamp?: string } })[];
    };
    const live = list.items.filter((p) => !p.metadata.deletionTimestamp && p.status.phase === 'Running');
    assert.equal(
      live.length,
      1,
      `one running ${app} pod: ${list.items.map((p) => p.metadata.name).join(', ')}`,
    );
    return live[0] as PodView;
  }

  /** An admin-port path of a pod, read through the API server's pod proxy (no port-forward). */
  const viaPodProxy = async (pod: string, p: string): Promise<string> =>
    (await kubectl(['get', '--raw', `/api/v1/namespaces/${ns}/pods/${pod}:7402/proxy${p}`])).stdout;

  const counted = (metrics: string, labels: RegExp): number =>
    metrics
      .split('\n')
      .filter((l) => l.startsWith('outrigger_requests_total{') && labels.test(l))
      .reduce((n, l) => n + Number(l.split(' ').pop()), 0);

  /** The client app's call to the web Service by its DNS name (wget's extra arguments before the URL). */
  const callWeb = (client: string, allowFail = false, wgetArgs: string[] = []) =>
    kubectl(
      [
        '-n',
        ns,
        'exec',
        client,
        '-c',
        'app',
        '--',
        'wget',
        '-qO-',
        ...wgetArgs,
        `http://web.${ns}.svc.cluster.local/index.html`,
      ],
      { allowFail },
    );

  /**
   * The rotor pod: the webhook's own injection (a server-side dry run), with the sidecar token's
   * expirationSeconds cut from the injected 3600 to 600, so that the kubelet renews it at 80 %
   * (480 s) within the run; the same kubelet code path renews the injected token at 2880 s. The
   * webhook leaves the edited pod alone: it is already injected.
   */
  async function createRotor(): Promise<{ created: number }> {
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      // Strict, so that its liveness probe is rewritten to the sidecar (plaintext probes would be refused).
      metadata: {
        name: 'rotor',
        namespace: ns,
        labels: { app: 'rotor' },
        annotations: { 'outrigger.dev/mtls': 'strict' },
      },
      spec: {
        terminationGracePeriodSeconds: 5,
        containers: [
          {
            name: 'app',
            image: c.node.images.busybox,
            imagePullPolicy: 'Never',
            command: [
              'sh',
              '-c',
              'trap "exit 0" TERM; mkdir -p /www && echo ok >/www/alive; httpd -f -p 8080 -h /www & while true; do sleep 1; done',
            ],
            livenessProbe: { httpGet: { path: '/alive', port: 8080 }, periodSeconds: 2, failureThreshold: 2 },
          },
        ],
      },
    };
    const dry = await kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], {
      input: JSON.stringify(pod),
    });
    const injected = JSON.parse(dry.stdout) as {
      metadata: Record<string, unknown>;
      spec: { volumes: { name: string; projected?: { sources: { serviceAccountToken?: object }[] } }[] };
      status?: unknown;
    };
    const token = injected.spec.volumes
      .find((v) => v.name === 'outrigger-token')
      ?.projected?.sources.find((x) => x.serviceAccountToken)?.serviceAccountToken as
      { expirationSeconds: number } | undefined;
    assert.equal(token?.expirationSeconds, 3600, JSON.stringify(injected.spec.volumes));
    token.expirationSeconds = 600;
    for (const k of ['uid', 'resourceVersion', 'creationTimestamp', 'managedFields'])
      delete injected.metadata[k];
    delete injected.status;
    const created = Date.now();
    await kubectl(['create', '-f', '-'], { input: JSON.stringify(injected) });
    return { created };
  }

  /** A sidecar's /debug path, answered on loopback only: from inside the pod's network namespace. */
  async function sidecarDebug<T>(uid: string, p: string): Promise<T> {
    const [any] = podProcesses(c.node.cgroup, uid);
    assert.ok(any, 'the pod runs');
    const r = await run('nsenter', [
      '-t',
      String(any.pid),
      '-n',
      '--',
      'curl',
      '-sS',
      '--max-time',
      '5',
      `http://127.0.0.1:7402${p}`,
    ]);
    return JSON.parse(r.stdout) as T;
  }

  const sidecarDiscovery = (uid: string) =>
    sidecarDebug<{
      ready: boolean;
      counters: { indexedServices: number; unauthorizedRetries: number; tokenExpiresAtMs?: number };
    }>(uid, '/debug/discovery');

  before(async () => {
    hostRulesBefore = new Set(await hostRules());
    c = await startNodeCluster();
    await c.importImage(archive);
    ns = await createPodNamespace(c, 'shop');
    other = await createPodNamespace(c, 'plain');
    // As the README's install section: install's output to kubectl, then the namespace label;
    // --identity adds the issuer and a mesh CA made by install.
    const manifests = await cli([
      'install',
      '--identity',
      '--image',
      image,
      '--namespaces',
      ns,
      '--kubeconfig',
      c.cluster.kubeconfigPath,
    ]);
    await kubectl(['apply', '-f', '-'], { input: manifests.stdout });
    await kubectl(['label', 'namespace', ns, 'outrigger.dev/injection=enabled']);
    await kubectl([
      '-n',
      'outrigger-system',
      'rollout',
      'status',
      'deploy/outrigger-webhook',
      '--timeout=180s',
    ]);
    // As soon as the webhook answers, so that its token's lifetime runs while the other tests do.
    rotor = await createRotor();
    await kubectl([
      '-n',
      'outrigger-system',
      'rollout',
      'status',
      'deploy/outrigger-identity',
      '--timeout=180s',
    ]);
    await kubectl(['apply', '-f', '-'], { input: workloads(ns, c.node.images.busybox) });
    for (const d of ['web', 'legacy', 'client'])
      await kubectl(['-n', ns, 'rollout', 'status', `deploy/${d}`, '--timeout=180s']);
  });
  after(async () => {
    await c?.stop();
  });

  test('the in-cluster webhook injects the capture step and a native sidecar that is ready before the app starts', async () => {
    const web = await podOf('web');
    const full = JSON.parse(
      (await kubectl(['-n', ns, 'get', 'pod', web.metadata.name, '-o', 'json'])).stdout,
    ) as {
      metadata: { annotations: Record<string, string> };
      spec: { initContainers: { name: string; restartPolicy?: string; image: string }[] };
    };
    assert.deepEqual(
      full.spec.initContainers.map((i) => [i.name, i.restartPolicy ?? '', i.image]),
      [
        ['outrigger-init', '', image],
        ['outrigger-proxy', 'Always', image],
      ],
    );
    assert.match(full.metadata.annotations['outrigger.dev/injected'] ?? '', /"sidecar":"native"/);
    const sidecar = web.status.initContainerStatuses?.find((s) => s.name === 'outrigger-proxy');
    const app = web.status.containerStatuses?.find((s) => s.name === 'app');
    assert.ok(sidecar?.state.running && app?.state.running, JSON.stringify(web.status));
    assert.ok(sidecar.ready && app.ready, 'both ready');
    assert.ok(
      Date.parse(sidecar.state.running.startedAt) <= Date.parse(app.state.running.startedAt),
      'the app started after the sidecar',
    );
    // Its discovery runs on the kubelet's projected token: ready means it listed and watched.
    assert.match(await viaPodProxy(web.metadata.name, '/readyz'), /"ready":true/);
  });

  test("the app's call crosses both sidecars over mutual TLS, counted by each under the caller's identity", async () => {
    const client = (await podOf('client')).metadata.name;
    const web = (await podOf('web')).metadata.name;
    const egress = async () =>
      counted(
        await viaPodProxy(client, '/metrics'),
        new RegExp(`direction="egress",service="${ns}/web".*status="200"`),
      );
    const ingress = async () =>
      counted(
        await viaPodProxy(web, '/metrics'),
        new RegExp(`direction="ingress".*caller="${ns}/default",status="200"`),
      );
    const [egress0, ingress0] = [await egress(), await ingress()];
    for (let i = 0; i < 3; i++) assert.equal((await callWeb(client)).stdout.trim(), BODY);
    assert.equal((await egress()) - egress0, 3, "the client's sidecar counted the 3 calls to the Service");
    assert.equal(
      (await ingress()) - ingress0,
      3,
      "the server's sidecar counted the 3 calls, from the client's identity",
    );
  });

  test("Jaeger on the node holds the call as one trace: the client's span, and the server's as its child", async (t) => {
    if (!requireTool(t, c.node.jaeger, 'Jaeger', "run 'scripts/test-cluster build jaeger'")) return;
    type Trace = {
      traceID: string;
      processes: Record<string, { serviceName: string }>;
      spans: { spanID: string; processID: string; references?: { spanID: string }[] }[];
    };
    const url = `http://${c.node.ip}:16686/api/traces?service=client&limit=50`;
    const deadline = Date.now() + 30_000;
    let traces: Trace[];
    for (;;) {
      traces = (
        JSON.parse((await c.inNode(['curl', '-sS', '--max-time', '5', url])).stdout) as { data: Trace[] }
      ).data;
      const hops = traces.map((tr) => {
        const service = (s: Trace['spans'][number]) => tr.processes[s.processID]?.serviceName;
        const client = tr.spans.find((s) => service(s) === 'client');
        return tr.spans.some(
          (s) => service(s) === 'web' && s.references?.some((r) => r.spanID === client?.spanID),
        );
      });
      if (hops.includes(true)) return;
      if (Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    assert.fail(`no trace with a client span and a web child span: ${JSON.stringify(traces).slice(0, 2000)}`);
  });

  test('a pod without the mesh is refused by the strict server: 403 mesh_caller_denied', async () => {
    const vip = JSON.parse((await kubectl(['-n', ns, 'get', 'service', 'web', '-o', 'json'])).stdout) as {
      spec: { clusterIP: string };
    };
    await kubectl([
      '-n',
      other,
      'run',
      'plain',
      `--image=${c.node.images.busybox}`,
      '--image-pull-policy=Never',
      '--restart=Never',
      '--',
      'sleep',
      '600',
    ]);
    await kubectl(['-n', other, 'wait', '--for=condition=Ready', 'pod/plain', '--timeout=90s']);
    const res = await kubectl(
      ['-n', other, 'exec', 'plain', '--', 'wget', '-qO-', '-S', `http://${vip.spec.clusterIP}/index.html`],
      { allowFail: true },
    );
    assert.match(res.stderr + res.stdout, /403 Forbidden/);
    const web = (await podOf('web')).metadata.name;
    assert.ok(counted(await viaPodProxy(web, '/metrics'), /status="403",error="mesh_caller_denied"/) >= 1);
  });

  test('the rewritten readiness probe passes when the kubelet calls it, and fails while the app fails', async () => {
    const web = await podOf('web');
    const spec = JSON.parse(
      (await kubectl(['-n', ns, 'get', 'pod', web.metadata.name, '-o', 'json'])).stdout,
    ) as {
      spec: { containers: { name: string; readinessProbe?: { httpGet?: { path: string; port: number } } }[] };
    };
    const probe = spec.spec.containers.find((x) => x.name === 'app')?.readinessProbe?.httpGet;
    assert.deepEqual(probe, { path: '/app-health/app/readyz', port: 7402, scheme: 'HTTP' });
    const ready = async (want: boolean): Promise<void> => {
      const deadline = Date.now() + 60_000;
      let last = '';
      while (Date.now() < deadline) {
        last = (
          await kubectl([
            '-n',
            ns,
            'get',
            'pod',
            web.metadata.name,
            '-o',
            'jsonpath={.status.containerStatuses[?(@.name=="app")].ready}',
          ])
        ).stdout;
        if (last === String(want)) return;
        await new Promise((r) => setTimeout(r, 500));
      }
      assert.fail(`app ready=${last}, want ${want}`);
    };
    const mv = (from: string, to: string) =>
      kubectl(['-n', ns, 'exec', web.metadata.name, '-c', 'app', '--', 'busybox', 'mv', from, to]);
    await mv('/www/index.html', '/www/gone');
    await ready(false);
    await mv('/www/gone', '/www/index.html');
    await ready(true);
  });

  test('the gateway, as a Deployment behind its Service and a mesh client, serves Ingresses to a plain pod and to a strict one', async () => {
    // An upgrade that adds the gateway: install again, as the README says, with --gateway-mtls.
    const manifests = await cli(['install', '--gateway-mtls', '--kubeconfig', c.cluster.kubeconfigPath]);
    await kubectl(['apply', '-f', '-'], { input: manifests.stdout });
    const ingress = (name: string) => ({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'Ingress',
      metadata: { name, namespace: ns },
      spec: {
        ingressClassName: 'outrigger',
        rules: [
          {
            host: `${name}.example.com`,
            http: {
              paths: [
                { path: '/', pathType: 'Prefix', backend: { service: { name, port: { name: 'http' } } } },
              ],
            },
          },
        ],
      },
    });
    await kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [ingress('legacy'), ingress('web')],
      }),
    });
    await kubectl([
      '-n',
      'outrigger-gateway',
      'rollout',
      'status',
      'deploy/outrigger-gateway',
      '--timeout=180s',
    ]);
    const svc = JSON.parse(
      (await kubectl(['-n', 'outrigger-gateway', 'get', 'service', 'outrigger-gateway', '-o', 'json']))
        .stdout,
    ) as { spec: { clusterIP: string } };
    // From the node (the host has no route to the cluster's addresses), as a client outside it.
    const get = (host: string) =>
      c.inNode(
        ['curl', '-sS', '--max-time', '5', '-H', `Host: ${host}`, `http://${svc.spec.clusterIP}/index.html`],
        { allowFail: true },
      );
    const server = (await podOf('web')).metadata.name;
    const fromGateway = async () =>
      counted(
        await viaPodProxy(server, '/metrics'),
        /direction="ingress".*caller="outrigger-gateway\/outrigger-gateway",status="200"/,
      );
    const before = await fromGateway();
    const deadline = Date.now() + 60_000;
    let last: Record<string, ExecResult> = {};
    while (Date.now() < deadline) {
      last = { legacy: await get('legacy.example.com'), web: await get('web.example.com') };
      if (last.legacy?.stdout.trim() === LEGACY && last.web?.stdout.trim() === BODY) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    assert.equal(last.legacy?.stdout.trim(), LEGACY, `the plain pod: ${JSON.stringify(last.legacy)}`);
    // Under mtls strict a plaintext caller gets 403 mesh_caller_denied: this one came over mutual TLS.
    assert.equal(last.web?.stdout.trim(), BODY, `the strict pod: ${JSON.stringify(last.web)}`);
    assert.ok(
      (await fromGateway()) > before,
      "the strict pod's sidecar counted the call under the gateway's identity",
    );
  });

  test("outrigger status -n lists every injected pod with its sidecar ready and on the control plane's version; version shows the server side", async () => {
    const kc = ['--kubeconfig', c.cluster.kubeconfigPath];
    const status = await cli(['status', '-n', ns, '-o', 'json', ...kc], { allowFail: true });
    assert.equal(status.code, 0, status.stdout + status.stderr);
    const fleet = JSON.parse(status.stdout) as {
      controlPlane: string;
      sidecars: { pod: string; ready: string; version: string; skew: boolean }[];
    };
    assert.equal(fleet.controlPlane, version);
    assert.deepEqual(
      fleet.sidecars
        .map((s) => [s.pod.replace(/-[a-z0-9]+-[a-z0-9]+$/, ''), s.ready, s.version, s.skew])
        .sort(),
      [
        ['client', 'yes', version, false],
        ['legacy', 'yes', version, false],
        ['rotor', 'yes', version, false],
        ['web', 'yes', version, false],
      ],
    );
    const text = await cli(['status', '-A', ...kc]);
    assert.match(text.stdout, /4 sidecar\(s\), 4 ready, 0 on another version/);
    const v = await cli(['version', ...kc]);
    assert.match(
      v.stdout,
      new RegExp(
        `^server: {2}Kubernetes v1\\.33\\.4; control plane outrigger ${version.replaceAll('.', '\\.')}$`,
        'm',
      ),
    );
  });

  test('outrigger check passes on this cluster, and names the webhook when its Deployment has no replicas', async () => {
    const kc = ['--kubeconfig', c.cluster.kubeconfigPath];
    const ok = await cli(['check', ...kc], { allowFail: true });
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    await kubectl(['-n', 'outrigger-system', 'scale', 'deploy/outrigger-webhook', '--replicas=0']);
    await kubectl(
      [
        '-n',
        'outrigger-system',
        'wait',
        '--for=delete',
        'pod',
        '-l',
        'app.kubernetes.io/component=webhook',
        '--timeout=60s',
      ],
      {
        allowFail: true,
      },
    );
    const broken = await cli(['check', ...kc], { allowFail: true });
    assert.equal(broken.code, 1, broken.stdout);
    assert.match(broken.stdout, /outrigger-webhook/);
    await kubectl(['-n', 'outrigger-system', 'scale', 'deploy/outrigger-webhook', '--replicas=2']);
    await kubectl([
      '-n',
      'outrigger-system',
      'rollout',
      'status',
      'deploy/outrigger-webhook',
      '--timeout=120s',
    ]);
  });

  test("with the API server stopped, the app reaches the server through both sidecars, also after its sidecar restarts, and a Service it never called through the cluster's own path", async () => {
    const client = await podOf('client');
    const clusterIP = async (name: string) =>
      (
        JSON.parse((await kubectl(['-n', ns, 'get', 'service', name, '-o', 'json'])).stdout) as {
          spec: { clusterIP: string };
        }
      ).spec.clusterIP;
    const [webIP, legacyIP] = [await clusterIP('web'), await clusterIP('legacy')];
    const procs = () => podProcesses(c.node.cgroup, client.metadata.uid);
    const app = procs().find((p) => p.cmdline.startsWith('sh -c trap') || p.cmdline.startsWith('sleep'));
    assert.ok(app, JSON.stringify(procs()));
    // kubectl exec needs the API server: enter the client pod's network namespace directly (its
    // capture rules send this connection to its sidecar as they do the app's).
    const get = (ip = webIP) =>
      run(
        'nsenter',
        ['-t', String(app.pid), '-n', '--', 'curl', '-sS', '--max-time', '5', `http://${ip}/index.html`],
        {
          allowFail: true,
        },
      );
    assert.equal((await get()).stdout.trim(), BODY, 'before the outage');
    await c.cluster.apiserverStop();
    const outage: string[] = [];
    let restarted: boolean | undefined;
    try {
      for (let i = 0; i < 3; i++) outage.push((await get()).stdout.trim());
      // Its endpoints were never fetched: the sidecar passes the call to the ClusterIP (kube-proxy).
      outage.push((await get(legacyIP)).stdout.trim());
      // The sidecar dies mid-outage; the kubelet restarts it (a native sidecar) with no API server.
      const sidecar = procs().find((p) => p.cmdline.includes('main.js proxy'));
      assert.ok(sidecar, JSON.stringify(procs()));
      process.kill(sidecar.pid, 'SIGKILL');
      const deadline = Date.now() + 60_000;
      let last: ExecResult | undefined;
      while (Date.now() < deadline && last?.stdout.trim() !== BODY) {
        await new Promise((r) => setTimeout(r, 500));
        last = await get();
      }
      outage.push(last?.stdout.trim() || (last?.stderr.trim() ?? ''));
      const again = procs().find((p) => p.cmdline.includes('main.js proxy'));
      restarted = again !== undefined && again.pid !== sidecar.pid;
    } finally {
      await c.cluster.apiserverStart();
    }
    // What it routed by, in its own words: its snapshot, and the certificate it had stored.
    const logs = (await kubectl(['-n', ns, 'logs', client.metadata.name, '-c', 'outrigger-proxy'])).stdout;
    assert.deepEqual(
      outage,
      [BODY, BODY, BODY, LEGACY, BODY],
      `3 calls, one to the Service never called, one after the restart; sidecar log:\n${logs}`,
    );
    assert.ok(restarted, 'a new sidecar process answered');
    assert.match(logs, /snapshot loaded; serving it as stale/);
    assert.match(logs, /using the stored identity/);
  });

  test("an HTTPRoute attached to the web Service sends the client's calls with x-canary: 1 to legacy (mesh-routes)", async () => {
    await installGatewayApi(c.cluster.admin);
    await c.cluster.admin.apply(
      httpRoute(ns, 'web-canary', {
        parentRefs: [{ group: '', kind: 'Service', name: 'web', port: 80 }],
        rules: [
          {
            matches: [{ headers: [{ name: 'x-canary', value: '1' }] }],
            backendRefs: [{ name: 'legacy', port: 80 }],
          },
          { backendRefs: [{ name: 'web', port: 80 }] },
        ],
      }),
    );
    // The annotation is read when the sidecar starts: a new pod, as a user's rollout makes one.
    const annotate = {
      spec: { template: { metadata: { annotations: { 'outrigger.dev/mesh-routes': 'true' } } } },
    };
    await kubectl(['-n', ns, 'patch', 'deployment', 'client', '-p', JSON.stringify(annotate)]);
    await kubectl(['-n', ns, 'rollout', 'status', 'deploy/client', '--timeout=180s']);
    const { name: client, uid } = (await podOf('client')).metadata;
    const canary = () => callWeb(client, true, ['--header', 'x-canary: 1']);
    const deadline = Date.now() + 60_000;
    let last = await canary();
    while (last.stdout.trim() !== LEGACY && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1_000));
      last = await canary();
    }
    assert.equal(last.stdout.trim(), LEGACY, `the canary header went to legacy: ${JSON.stringify(last)}`);
    for (let i = 0; i < 3; i++) assert.equal((await callWeb(client)).stdout.trim(), BODY, 'the rest to web');
    const routes = await sidecarDebug<{ httpRoutes: number; services: number }>(uid, '/debug/routes');
    assert.deepEqual([routes.httpRoutes, routes.services], [1, 1]);
  });

  test("after a burst of calls the client's sidecar gives its memory back once quiet (the image's allocator, a pod's limits)", async () => {
    const client = await podOf('client');
    const procs = () => podProcesses(c.node.cgroup, client.metadata.uid);
    const app = procs().find((p) => p.cmdline.startsWith('sh -c trap') || p.cmdline.startsWith('sleep'));
    const sidecar = procs().find((p) => p.cmdline.includes('main.js proxy'));
    assert.ok(app && sidecar, JSON.stringify(procs()));
    const privateMb = (): number => {
      const rollup = readFileSync(`/proc/${sidecar.pid}/smaps_rollup`, 'utf8');
      const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? NaN);
      return (kb('Private_Clean') + kb('Private_Dirty')) / 1024;
    };
    const trims = async (): Promise<number> =>
      Number(
        /^outrigger_idle_trims (\d+)/m.exec(await viaPodProxy(client.metadata.name, '/metrics'))?.[1] ?? NaN,
      );
    const web = (
      JSON.parse((await kubectl(['-n', ns, 'get', 'service', 'web', '-o', 'json'])).stdout) as {
        spec: { clusterIP: string };
      }
    ).spec.clusterIP;
    const before = { mb: privateMb(), trims: await trims() };
    assert.ok(Number.isFinite(before.mb) && Number.isFinite(before.trims), JSON.stringify(before));

    // 3,000 calls, 50 at a time, from the app's network namespace through its capture rules.
    const burst = run(
      'nsenter',
      [
        '-t',
        String(app.pid),
        '-n',
        '--',
        'curl',
        '-sS',
        '--parallel',
        '--parallel-max',
        '50',
        '--max-time',
        '10',
        `http://${web}/index.html?n=[1-3000]`,
      ],
      { allowFail: true, timeoutMs: 120_000 },
    );
    let peak = before.mb;
    for (let done = false; !done;) {
      done = await Promise.race([
        burst.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), 250)),
      ]);
      peak = Math.max(peak, privateMb());
    }
    const load = await burst;
    assert.equal(load.code, 0, load.stderr);

    // Quiet for two 5-s checks, then a trim: wait for it (bounded).
    const deadline = Date.now() + 90_000;
    let now = before.trims;
    while (now === before.trims && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 2_000));
      now = await trims();
    }
    const after = privateMb();
    const summary = `private MB before ${before.mb.toFixed(1)}, peak ${peak.toFixed(1)}, after ${after.toFixed(1)}; trims ${before.trims} -> ${now}`;
    assert.ok(now > before.trims, `no trim within 90 s of the burst: ${summary}`);
    assert.ok(peak - before.mb > 4, `the burst grew the sidecar: ${summary}`);
    assert.ok(after - before.mb < 10, `back within 10 MB of before: ${summary}`);
    process.stderr.write(`# ${summary}\n`);
  });

  test("gRPC at 1,000 calls/s through the client's sidecar to an h2c Service: every call OK, the sidecar within its memory limit", async () => {
    // An h2c server in the Outrigger image's Node: each call answered with an empty message and OK trailers.
    const server = `require('http2').createServer().on('stream', (s) => { s.on('error', () => {}); s.resume();
      s.on('end', () => { s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      s.once('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' })); s.end(Buffer.alloc(5)); }); }).listen(8080)`;
    const rpc = [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'rpc', namespace: ns },
        spec: {
          selector: { matchLabels: { app: 'rpc' } },
          template: {
            metadata: { labels: { app: 'rpc' } },
            spec: {
              terminationGracePeriodSeconds: 5,
              containers: [
                {
                  name: 'app',
                  image,
                  imagePullPolicy: 'Never',
                  command: ['node', '-e', server],
                  ports: [{ containerPort: 8080 }],
                },
              ],
            },
          },
        },
      },
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'rpc', namespace: ns },
        spec: {
          selector: { app: 'rpc' },
          ports: [{ name: 'grpc', port: 80, targetPort: 8080, appProtocol: 'kubernetes.io/h2c' }],
        },
      },
    ];
    for (const o of rpc) await kubectl(['apply', '-f', '-'], { input: JSON.stringify(o) });
    await kubectl(['-n', ns, 'rollout', 'status', 'deploy/rpc', '--timeout=180s']);
    const address = (
      JSON.parse((await kubectl(['-n', ns, 'get', 'service', 'rpc', '-o', 'json'])).stdout) as {
        spec: { clusterIP: string };
      }
    ).spec.clusterIP;

    const client = await podOf('client');
    const procs = () => podProcesses(c.node.cgroup, client.metadata.uid);
    const app = procs().find((p) => p.cmdline.startsWith('sh -c trap') || p.cmdline.startsWith('sleep'));
    const sidecar = procs().find((p) => p.cmdline.includes('main.js proxy'));
    assert.ok(app && sidecar, JSON.stringify(procs()));
    const memory = (): { rss: number; priv: number } => {
      const rollup = readFileSync(`/proc/${sidecar.pid}/smaps_rollup`, 'utf8');
      const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? NaN);
      return { rss: kb('Rss') / 1024, priv: (kb('Private_Clean') + kb('Private_Dirty')) / 1024 };
    };
    const egress = async () =>
      counted(
        await viaPodProxy(client.metadata.name, '/metrics'),
        new RegExp(`direction="egress",service="${ns}/rpc".*status="200"`),
      );
    const [before, egress0] = [memory(), await egress()];

    // 10,000 unary calls at 1,000 a second over 10 connections (prior-knowledge h2c), from the
    // app's network namespace through its capture rules; bounded at 60 s.
    const load = `const h2 = require('http2'); const sessions = Array.from({ length: 10 }, () => h2.connect('http://${address}:80'));
      for (const s of sessions) s.on('error', () => {});
      let sent = 0, ok = 0, failed = 0; const errors = {};
      const one = (s) => { const r = s.request({ ':method': 'POST', ':path': '/bench.Rpc/Call', 'content-type': 'application/grpc', te: 'trailers' });
        let status; r.on('response', (h) => (status = h['grpc-status'])); r.on('trailers', (t) => (status = t['grpc-status']));
        r.on('error', (e) => { errors[e.code] = (errors[e.code] ?? 0) + 1; }); r.resume();
        r.on('close', () => { status === '0' ? ok++ : failed++; if (ok + failed === 10000) done(); }); r.end(Buffer.alloc(5)); };
      const tick = setInterval(() => { for (let i = 0; i < 10 && sent < 10000; i++) one(sessions[sent++ % 10]); }, 10);
      const done = () => { clearInterval(tick); for (const s of sessions) s.close(); process.stdout.write(JSON.stringify({ sent, ok, failed, errors })); process.exit(0); };
      setTimeout(done, 60000);`;
    const calls = run('nsenter', ['-t', String(app.pid), '-n', '--', process.execPath, '-e', load], {
      timeoutMs: 90_000,
    });
    let peak = before;
    for (let finished = false; !finished;) {
      finished = await Promise.race([
        calls.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), 250)),
      ]);
      const m = memory();
      peak = { rss: Math.max(peak.rss, m.rss), priv: Math.max(peak.priv, m.priv) };
    }
    const result = JSON.parse((await calls).stdout) as {
      sent: number;
      ok: number;
      failed: number;
      errors: object;
    };
    const summary = `${JSON.stringify(result)}; sidecar RSS MB before ${before.rss.toFixed(1)}, peak ${peak.rss.toFixed(1)}; private before ${before.priv.toFixed(1)}, peak ${peak.priv.toFixed(1)}`;
    assert.deepEqual([result.ok, result.failed], [10_000, 0], summary);
    assert.equal((await egress()) - egress0, 10_000, `the calls went through the sidecar: ${summary}`);
    assert.equal(
      procs().find((p) => p.cmdline.includes('main.js proxy'))?.pid,
      sidecar.pid,
      `the same sidecar process (not OOM-killed): ${summary}`,
    );
    // The injected limit is 192Mi (201 MB); the kernel kills a container above it.
    assert.ok(peak.rss < 201, summary);
    process.stderr.write(`# ${summary}\n`);
  });

  test('the rewritten liveness probe passes when the kubelet calls it; when the app fails it, the kubelet restarts the app', async () => {
    const pod = await podOf('rotor');
    const spec = JSON.parse(
      (await kubectl(['-n', ns, 'get', 'pod', pod.metadata.name, '-o', 'json'])).stdout,
    ) as {
      spec: { containers: { name: string; livenessProbe?: { httpGet?: object } }[] };
      status: { containerStatuses: { name: string; restartCount: number }[] };
    };
    const probe = spec.spec.containers.find((x) => x.name === 'app')?.livenessProbe?.httpGet;
    assert.deepEqual(probe, { path: '/app-health/app/livez', port: 7402, scheme: 'HTTP' });
    const restarts = async (): Promise<number> =>
      Number(
        (
          await kubectl([
            '-n',
            ns,
            'get',
            'pod',
            pod.metadata.name,
            '-o',
            'jsonpath={.status.containerStatuses[?(@.name=="app")].restartCount}',
          ])
        ).stdout,
      );
    // Probed every 2 s since the pod started, minutes ago.
    assert.equal(await restarts(), 0, 'the kubelet found the app alive through the sidecar');
    await kubectl(['-n', ns, 'exec', pod.metadata.name, '-c', 'app', '--', 'busybox', 'rm', '/www/alive']);
    const deadline = Date.now() + 60_000;
    while ((await restarts()) === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(await restarts(), 1, 'the kubelet restarted the app once');
  });

  describe('a pod on a real node, before any mesh', () => podChecks(() => ({ c, image })));

  test("the kubelet renews the sidecar's projected token, and the sidecar sends the new one from then on", async () => {
    const uid = (await podOf('rotor')).metadata.uid;
    const first = await sidecarToken(c.cluster.stateDir, uid);
    assert.equal(first.expMs - first.iatMs, 600_000, 'a 600 s token');
    assert.ok(first.iatMs >= rotor.created - 1_000, 'issued for this pod');
    const held = async (): Promise<number | undefined> =>
      (await sidecarDiscovery(uid)).counters.tokenExpiresAtMs;
    assert.equal(await held(), first.expMs, "the sidecar holds the kubelet's token");
    // The kubelet renews at 80 % of the lifetime less up to 10 s of jitter, and writes the projected
    // volume at its next pod sync (every 60 s): by 80 % + 70 s.
    const deadline = first.iatMs + 480_000 + 90_000;
    let seen = first.expMs;
    while (seen === first.expMs && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5_000));
      seen = (await held()) ?? first.expMs;
    }
    const renewed = await sidecarToken(c.cluster.stateDir, uid);
    assert.notEqual(renewed.jti, first.jti, `renewed within ${(deadline - first.iatMs) / 1000} s of issue`);
    assert.equal(seen, renewed.expMs, 'the sidecar read the renewed token');
    // A watch authenticates once, when it opens: after a restart every request is new, and the API
    // server's audit log names the token each one carried (its JTI), long before the first expires.
    const before = await sidecarDiscovery(uid);
    const stoppedAt = Date.now();
    await c.cluster.apiserverStop();
    await c.cluster.apiserverStart();
    // A Service created now reaches the sidecar only through a watch or list opened after the restart.
    await kubectl(['-n', ns, 'create', 'service', 'clusterip', 'after-rotation', '--tcp=80:8080']);
    let after = before;
    for (let i = 0; i < 60 && after.counters.indexedServices <= before.counters.indexedServices; i++) {
      await new Promise((r) => setTimeout(r, 1_000));
      after = await sidecarDiscovery(uid);
    }
    assert.equal(after.counters.indexedServices, before.counters.indexedServices + 1, JSON.stringify(after));
    assert.ok(Date.now() < first.expMs, 'all of it while the first token was still valid');
    const calls = auditedCalls(c.cluster.stateDir, uid);
    assert.ok(
      calls.some((x) => x.jti === first.jti && x.receivedMs < stoppedAt),
      `the audit log saw the first token: ${JSON.stringify(calls.slice(0, 3))}`,
    );
    const since = calls.filter((x) => x.receivedMs >= stoppedAt);
    assert.ok(since.length > 0, 'the sidecar called the API server after the restart');
    assert.deepEqual([...new Set(since.map((x) => x.jti))], [renewed.jti], 'only the renewed token');
    assert.equal(after.counters.unauthorizedRetries, 0);
    const logs = (await kubectl(['-n', ns, 'logs', 'rotor', '-c', 'outrigger-proxy'])).stdout;
    assert.match(logs, /service-account token rotated/);
  });

  test('uninstall | kubectl delete -f - leaves no object of Outrigger and none of the user; new pods start without a sidecar', async () => {
    const un = await cli(['uninstall', '--kubeconfig', c.cluster.kubeconfigPath]);
    // The label on a namespace install did not make is removed by a command uninstall prints.
    const commands = [...un.stderr.matchAll(/^ {2}kubectl (.*)$/gm)].map((m) => (m[1] ?? '').split(' '));
    assert.ok(
      commands.some((args) => args.join(' ') === `label namespace ${ns} outrigger.dev/injection-`),
      un.stderr,
    );
    for (const args of commands) await kubectl(args);
    await kubectl(['delete', '--timeout=240s', '-f', '-'], { input: un.stdout });

    const left = await kubectl([
      'get',
      'mutatingwebhookconfigurations,clusterroles,clusterrolebindings',
      '-l',
      'app.kubernetes.io/name=outrigger',
      '-o',
      'name',
    ]);
    assert.equal(left.stdout.trim(), '', 'no cluster-wide object of Outrigger is left');
    for (const gone of ['outrigger-system', 'outrigger-gateway']) {
      const r = await kubectl(['get', 'namespace', gone], { allowFail: true });
      assert.match(r.stderr, /NotFound/, `namespace ${gone} is gone`);
    }
    const kept = await kubectl(['get', 'namespace', ns, '-o', 'jsonpath={.metadata.labels}']);
    assert.doesNotMatch(kept.stdout, /outrigger\.dev\/injection/);
    const web = await kubectl(['-n', ns, 'get', 'deploy/web', '-o', 'name']);
    assert.equal(web.stdout.trim(), 'deployment.apps/web', "the user's workloads stay");

    await kubectl([
      '-n',
      ns,
      'run',
      'after-uninstall',
      `--image=${c.node.images.busybox}`,
      '--restart=Never',
      '--',
      'true',
    ]);
    const containers = await kubectl([
      '-n',
      ns,
      'get',
      'pod',
      'after-uninstall',
      '-o',
      'jsonpath={.spec.initContainers[*].name} {.spec.containers[*].name}',
    ]);
    assert.equal(containers.stdout.trim(), 'after-uninstall', 'no capture step and no sidecar');
  });

  test('down removes the node: no processes, mounts, cgroups, namespace or host iptables rules left', async () => {
    const state = c.cluster.stateDir;
    await c.stop();
    const leftovers: string[] = [];
    if (existsSync(`/var/run/netns/${c.node.netns}`)) leftovers.push(`netns ${c.node.netns}`);
    for (const h of readdirSync('/sys/fs/cgroup')) {
      if (existsSync(path.join('/sys/fs/cgroup', h, c.node.cgroup)))
        leftovers.push(`cgroup ${h}/${c.node.cgroup}`);
    }
    for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
      if (line.includes(state)) leftovers.push(`mount ${line}`);
    }
    for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      if (cmdline(pid).includes(state)) leftovers.push(`process ${pid}: ${cmdline(pid).slice(0, 120)}`);
    }
    if (existsSync(state)) leftovers.push(`state directory ${state}`);
    // kube-proxy, the kubelet and the bridge plugin wrote rules only in the node's namespace. Rules
    // the host had before (a container engine's own chains, say) are not ours to judge.
    const ours = /KUBE-|outrigger-node|10\.244\.|10\.200\./;
    for (const line of await hostRules()) {
      if (ours.test(line) || !hostRulesBefore.has(line)) leftovers.push(`host iptables: ${line}`);
    }
    assert.deepEqual(leftovers, []);
  });
});

/** The host namespace's iptables rules and user-defined chains (built-in chains carry a policy). */
async function hostRules(): Promise<string[]> {
  const out = (await run('iptables-save', [])).stdout;
  return out.split('\n').filter((l) => l.startsWith('-A ') || /^:\S+ - /.test(l));
}

/**
 * The sidecar's discovery token as the kubelet wrote it into the pod's projected volume: a tmpfs
 * mounted in the node's own mount namespace (scripts/test-node/node.sh), read from there.
 */
async function sidecarToken(
  stateDir: string,
  uid: string,
): Promise<{ jti: string; iatMs: number; expMs: number }> {
  const mntns = `/proc/${readFileSync(path.join(stateDir, 'node-mntns.pid'), 'utf8').trim()}/ns/mnt`;
  const file = path.join(
    stateDir,
    'node/kubelet/pods',
    uid,
    'volumes/kubernetes.io~projected/outrigger-token/token',
  );
  const token = (await run('nsenter', [`--mount=${mntns}`, '--', 'cat', file])).stdout;
  const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
    jti: string;
    iat: number;
    exp: number;
  };
  return { jti: claims.jti, iatMs: claims.iat * 1000, expMs: claims.exp * 1000 };
}

/** The API server's audit log (scripts/test-node/node.sh): each request made with a token bound to the pod. */
function auditedCalls(stateDir: string, uid: string): { jti: string; receivedMs: number; uri: string }[] {
  const extra = (e: AuditEvent, k: string): string | undefined =>
    e.user?.extra?.[`authentication.kubernetes.io/${k}`]?.[0];
  return readFileSync(path.join(stateDir, 'audit.log'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEvent)
    .filter((e) => extra(e, 'pod-uid') === uid)
    .map((e) => ({
      jti: (extra(e, 'credential-id') ?? '').replace(/^JTI=/, ''),
      receivedMs: Date.parse(e.requestReceivedTimestamp),
      uri: e.requestURI,
    }));
}

interface AuditEvent {
  requestURI: string;
  requestReceivedTimestamp: string;
  user?: { extra?: Record<string, string[]> };
}

/** The pod's processes (they share its network namespace), from the node's cgroup tree. */
function podProcesses(cgroup: string, uid: string): { pid: number; cmdline: string }[] {
  const dirs = [path.join('/sys/fs/cgroup/pids', cgroup, 'kubepods')];
  while (dirs.length > 0) {
    const dir = dirs.shift() ?? '';
    for (const e of readdirSync(dir, { withFileTypes: true }).filter((x) => x.isDirectory())) {
      const sub = path.join(dir, e.name);
      if (e.name !== `pod${uid}`) {
        dirs.push(sub);
        continue;
      }
      return readdirSync(sub, { withFileTypes: true })
        .filter((x) => x.isDirectory())
        .flatMap((ctr) => readFileSync(path.join(sub, ctr.name, 'cgroup.procs'), 'utf8').split('\n'))
        .filter(Boolean)
        .map((pid) => ({ pid: Number(pid), cmdline: cmdline(pid) }));
    }
  }
  throw new Error(`pod ${uid} has no cgroup under /sys/fs/cgroup/pids/${cgroup}/kubepods`);
}

function cmdline(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
  } catch {
    return ''; // exited meanwhile
  }
}
