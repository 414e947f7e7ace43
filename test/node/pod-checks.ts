// Pods on a real node, before any mesh: kubelet + containerd + runc + the CNI bridge + kube-proxy,
// inside a network namespace (scripts/test-cluster up --with-node).
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { createPodNamespace, run, waitForPod, type PodView, type TestNodeCluster } from '../harness/node.ts';
import { requireTool } from '../harness/tools.ts';

function inCidr(ip: string, cidr: string): boolean {
  const toInt = (a: string): number => a.split('.').reduce((n, p) => n * 256 + Number(p), 0);
  const [base = '', bits = '32'] = cidr.split('/');
  const size = 2 ** (32 - Number(bits));
  return Math.floor(toInt(ip) / size) === Math.floor(toInt(base) / size);
}

function jwtClaims(token: string): Record<string, unknown> {
  const payload = token.split('.')[1];
  assert.ok(payload, `not a JWT: ${token.slice(0, 40)}`);
  return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
}

// busybox's nc (its wget crashes on a connected socket); in the node namespace, the host's busybox.
const httpGet = 'printf "GET / HTTP/1.0\\r\\n\\r\\n" | busybox nc -w 3';

/**
 * The node's own parts, before any mesh: a native sidecar, the CNI bridge, kube-proxy, the kubelet's
 * projected token, CoreDNS, and the product's image as a plain pod. Registered inside the node
 * suite (test/node/node.test.ts), whose one cluster they share (a node takes 20-60 s to start).
 */
export function podChecks(get: () => { c: TestNodeCluster; image: string }): void {
  let c: TestNodeCluster;
  let ns: string;
  let pod: PodView;

  /** kubectl exec into a container of the web pod. */
  const inWeb = (container: string, argv: string[]) =>
    c.kubectl(['-n', ns, 'exec', 'web', '-c', container, '--', ...argv]);

  before(async () => {
    c = get().c;
    ns = await createPodNamespace(c, 'node');
  });

  test('a pod with a native sidecar runs, with an address from the CNI bridge', async () => {
    const image = c.node.images.busybox;
    await c.cluster.admin.apply({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web', namespace: ns, labels: { app: 'web' } },
      spec: {
        terminationGracePeriodSeconds: 1,
        initContainers: [
          {
            // restartPolicy Always on an init container: a native sidecar, started before the
            // app and kept running beside it.
            name: 'sidecar',
            image,
            imagePullPolicy: 'Never',
            restartPolicy: 'Always',
            command: [
              'sh',
              '-c',
              'mkdir -p /tmp/s && echo sidecar >/tmp/s/index.html && exec httpd -f -p 9090 -h /tmp/s',
            ],
            startupProbe: { tcpSocket: { port: 9090 }, periodSeconds: 1 },
          },
        ],
        containers: [
          {
            name: 'app',
            image,
            imagePullPolicy: 'Never',
            command: [
              'sh',
              '-c',
              'mkdir -p /tmp/www && hostname >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www',
            ],
            readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1 },
          },
        ],
      },
    });
    pod = await waitForPod(
      c,
      ns,
      'web',
      (p) =>
        p.status.phase === 'Running' &&
        (p.status.containerStatuses ?? []).every((s) => s.ready) &&
        (p.status.initContainerStatuses ?? []).every((s) => s.ready),
    );
    assert.equal(pod.spec.nodeName, c.node.name, 'placed by the scheduler on the node');
    const ip = pod.status.podIP ?? '';
    assert.ok(inCidr(ip, c.node.podCidr), `pod IP ${ip} is in the bridge's ${c.node.podCidr}`);
    const [side] = pod.status.initContainerStatuses ?? [];
    const [app] = pod.status.containerStatuses ?? [];
    assert.ok(side?.state.running && app?.state.running, JSON.stringify(pod.status));
    assert.ok(
      Date.parse(side.state.running.startedAt) <= Date.parse(app.state.running.startedAt),
      'the sidecar started before the app',
    );
    // Both containers answer on the pod's address, from the node's namespace (the host has no route).
    const fromNode = await c.inNode(['sh', '-c', `${httpGet} ${ip} 8080; ${httpGet} ${ip} 9090`]);
    assert.match(fromNode.stdout, /\nweb\n/);
    assert.match(fromNode.stdout, /\nsidecar\n/);
  });

  test("a Service's ClusterIP reaches the pod through kube-proxy's rules in the node namespace", async () => {
    const svc = await c.cluster.admin.apply<{ spec: { clusterIP: string } }>({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: ns },
      spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] },
    });
    const vip = svc.spec.clusterIP;
    // kube-proxy programs the rule once the controller's EndpointSlice names the pod.
    const deadline = Date.now() + 60_000;
    let out = '';
    while (Date.now() < deadline) {
      out = (await c.inNode(['sh', '-c', `${httpGet} ${vip} 80`], { allowFail: true })).stdout;
      if (out.includes('\nweb\n')) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    assert.match(out, /\nweb\n/, `GET http://${vip}/ from the node namespace`);
    const nat = (await c.inNode(['iptables-save', '-t', 'nat'])).stdout;
    const rule = nat.split('\n').find((l) => l.includes(`-d ${vip}/32`) && l.includes('KUBE-SVC-'));
    assert.ok(rule, `kube-proxy has a KUBE-SERVICES rule for ${vip} in the node namespace`);
    const chain = /-j (KUBE-SVC-\S+)/.exec(rule)?.[1] ?? '';
    const counters = (await c.inNode(['iptables', '-t', 'nat', '-L', chain, '-n', '-v', '-x'])).stdout;
    assert.match(counters, new RegExp(`KUBE-SEP-\\S+\\s+.*${ns}/web`), counters);
    const packets = counters
      .split('\n')
      .filter((l) => l.includes('KUBE-SEP-'))
      .map((l) => Number(l.trim().split(/\s+/)[0]));
    assert.ok(
      packets.some((n) => n > 0),
      `the request went through ${chain}:\n${counters}`,
    );
    // And from another pod, through the bridge.
    const fromPod = await inWeb('sidecar', ['sh', '-c', `${httpGet} ${vip} 80`]);
    assert.match(fromPod.stdout, /\nweb\n/);
    const host = (await run('iptables-save', [])).stdout;
    assert.ok(!host.includes(vip), 'no rule for the ClusterIP in the host namespace');
  });

  test('the pod has a projected service-account token bound to it, and the kubelet checks who asks', async () => {
    const vol = pod.spec.volumes?.find((v) => v.projected?.sources.some((s) => 'serviceAccountToken' in s));
    assert.ok(vol, `a projected serviceAccountToken volume in ${JSON.stringify(pod.spec.volumes)}`);
    // kubectl exec: the API server reaches the kubelet with its client certificate.
    const token = (
      await inWeb('app', ['cat', '/var/run/secrets/kubernetes.io/serviceaccount/token'])
    ).stdout.trim();
    const claims = jwtClaims(token) as {
      sub?: string;
      'kubernetes.io'?: {
        namespace?: string;
        pod?: { name?: string; uid?: string };
        node?: { name?: string };
      };
    };
    assert.equal(claims.sub, `system:serviceaccount:${ns}:default`);
    assert.equal(claims['kubernetes.io']?.pod?.name, 'web');
    assert.equal(claims['kubernetes.io']?.pod?.uid, pod.metadata.uid);
    assert.equal(claims['kubernetes.io']?.node?.name, c.node.name);
    const review = await c.cluster.admin.request<{
      status: { authenticated?: boolean; user?: { username?: string } };
    }>('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token },
    });
    assert.equal(review.status.authenticated, true);
    assert.equal(review.status.user?.username, `system:serviceaccount:${ns}:default`);
    // Without a client certificate the kubelet answers 401: it is not open to anonymous callers.
    const anon = await c.inNode(
      ['curl', '-sk', '-o', '/dev/null', '-w', '%{http_code}', `https://${c.node.ip}:10250/pods`],
      { allowFail: true },
    );
    assert.equal(anon.stdout, '401');
    // A certificate from the cluster CA is not enough: the kubelet asks the API server, and
    // kube-proxy's identity may not read the kubelet's API.
    const pki = c.cluster.pkiDir;
    const proxyCert = ['--cert', `${pki}/kube-proxy.crt`, '--key', `${pki}/kube-proxy.key`];
    const other = await c.inNode(
      [
        'curl',
        '-sk',
        ...proxyCert,
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        `https://${c.node.ip}:10250/pods`,
      ],
      { allowFail: true },
    );
    assert.equal(other.stdout, '403');
  });

  test('cluster DNS answers for the Service through kube-dns', async (t) => {
    if (!requireTool(t, Boolean(c.node.dns), 'CoreDNS', "run 'scripts/test-cluster build coredns'")) return;
    const svc = await c.cluster.admin.get<{ spec: { clusterIP: string } }>('Service', 'web', ns);
    const res = await inWeb('app', ['nslookup', `web.${ns}.svc.cluster.local`]);
    assert.match(
      res.stdout,
      new RegExp(`Address:\\s+${svc.spec.clusterIP.replaceAll('.', '\\.')}`),
      res.stdout,
    );
  });

  test("the product's image runs as a pod: outrigger version", async () => {
    const { image } = get();
    await c.cluster.admin.apply({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'outrigger-version', namespace: ns },
      spec: {
        restartPolicy: 'Never',
        containers: [{ name: 'outrigger', image, imagePullPolicy: 'Never', args: ['version'] }],
      },
    });
    const done = await waitForPod(c, ns, 'outrigger-version', (p) =>
      ['Succeeded', 'Failed'].includes(p.status.phase ?? ''),
    );
    const logs = await c.kubectl(['-n', ns, 'logs', 'outrigger-version']);
    assert.equal(done.status.phase, 'Succeeded', logs.stdout + logs.stderr);
    assert.match(logs.stdout, new RegExp(image.split(':').pop()?.replaceAll('.', '\\.') ?? ''));
  });
}
