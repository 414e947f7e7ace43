// The whole transparent data path in two network-namespace "pods":
//   app (client pod) -> iptables REDIRECT -> egress sidecar -> [veth] -> iptables REDIRECT ->
//   ingress sidecar (server pod) -> backend at its original destination (the pod IP).
// Each pod gets `outrigger iptables` and an `outrigger proxy --capture transparent` running as the
// proxy UID, exactly as the injector sets them up; discovery comes from the file source (the
// Service's ClusterIPs are reachable only through the sidecar, so a 200 proves the routing).
import assert from 'node:assert/strict';
import { chownSync, lchownSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startCluster, type TestCluster } from '../harness/cluster.ts';
import { bridgeIntoNetns, netnsUnavailable, requireNetns } from '../harness/netns.ts';
import type { Bridge, Netns } from '../harness/netns.ts';
import { writeTokenDir } from '../harness/token-dir.ts';
import {
  APP_UID,
  app,
  CLIENT4,
  node,
  PROXY_UID,
  SERVER4,
  SERVER6,
  startPods,
  tools,
  type Pods,
} from '../harness/transparent-pods.ts';

const podIPs = [SERVER4, SERVER6];

const services = `apiVersion: v1
kind: Service
metadata: { name: web, namespace: demo }
spec:
  type: ClusterIP
  clusterIP: 10.96.0.20
  clusterIPs: [10.96.0.20, "fd00:10:96::20"]
  ipFamilies: [IPv4, IPv6]
  ports: [{ name: http, port: 80, targetPort: 8080, protocol: TCP }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-v4, namespace: demo, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: http, port: 8080, protocol: TCP }]
endpoints: [{ addresses: ["${SERVER4}"], conditions: { ready: true } }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-v6, namespace: demo, labels: { kubernetes.io/service-name: web } }
addressType: IPv6
ports: [{ name: http, port: 8080, protocol: TCP }]
endpoints: [{ addresses: ["${SERVER6}"], conditions: { ready: true } }]
---
apiVersion: v1
kind: Service
metadata: { name: db, namespace: demo }
spec:
  type: ClusterIP
  clusterIP: 10.96.0.30
  ports: [{ name: tcp, port: 5000, targetPort: 9998, protocol: TCP }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: db-v4, namespace: demo, labels: { kubernetes.io/service-name: db } }
addressType: IPv4
ports: [{ name: tcp, port: 9998, protocol: TCP }]
endpoints: [{ addresses: ["${SERVER4}"], conditions: { ready: true } }]
`;

interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

async function get(pod: Netns, url: string, host?: string): Promise<Reply> {
  const r = await pod.exec([node, app, 'get', url, ...(host ? [host] : [])], {
    uid: APP_UID,
    timeoutMs: 15_000,
  });
  return JSON.parse(r.stdout) as Reply;
}

async function metrics(pod: Netns): Promise<string> {
  return (await get(pod, 'http://127.0.0.1:7402/metrics')).body;
}

/** The sum of outrigger_requests_total samples whose labels include every given pair. */
function requestCount(text: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('outrigger_requests_total{')) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)))
      sum += Number(line.split(' ').pop());
  }
  return sum;
}

describe('transparent mode end to end: app -> egress sidecar -> ingress sidecar -> backend', () => {
  let client: Netns;
  let server: Netns;
  let pods: Pods | undefined;
  const unavailable = netnsUnavailable(tools);

  before(async () => {
    if (unavailable) return;
    pods = await startPods((dir) => {
      const source = path.join(dir, 'services.yaml');
      writeFileSync(source, services, { mode: 0o644 });
      return ['--source', `file:${source}`, '--namespace', 'demo'];
    });
    ({ client, server } = pods);
  });

  after(async () => {
    await pods?.remove();
  });

  test('the tools are there (under CI=true a missing one fails)', (t) => {
    requireNetns(t, tools);
  });

  test('HTTP to a Service ClusterIP (IPv4) is balanced to its endpoint through both sidecars', async (t) => {
    if (!requireNetns(t, tools)) return;
    const r = await get(client, 'http://10.96.0.20/hello?x=1');
    assert.equal(r.status, 200, JSON.stringify(r));
    const body = JSON.parse(r.body) as {
      pod: string;
      port: number;
      url: string;
      headers: Record<string, string>;
      local: string;
    };
    assert.equal(body.pod, 'server');
    assert.equal(body.port, 8080);
    assert.equal(body.url, '/hello?x=1');
    // The ingress sidecar dials the original destination (a pod IP of either family: the Service
    // balances over its IPv4 and IPv6 endpoints), never localhost.
    assert.ok(podIPs.includes(body.local.replace(/^::ffff:/, '')), body.local);
    assert.match(body.headers['x-forwarded-for'] ?? '', new RegExp(CLIENT4.replace(/\./g, '\\.')));
  });

  // ip6tables REDIRECT sends the app's IPv6 connections to [::1]:7400, so egress must listen on
  // both loopbacks (as linkerd2-proxy does); a 127.0.0.1-only listener refuses them.
  test('HTTP to a Service ClusterIP (IPv6) is balanced to its endpoint through both sidecars', async (t) => {
    if (!requireNetns(t, tools)) return;
    const r = await get(client, 'http://[fd00:10:96::20]/six');
    assert.equal(r.status, 200, JSON.stringify(r));
    const body = JSON.parse(r.body) as { pod: string; url: string; local: string };
    assert.equal(body.pod, 'server');
    assert.equal(body.url, '/six');
    assert.ok(podIPs.includes(body.local.replace(/^::ffff:/, '')), body.local);
  });

  test('a destination that is no Service passes through to the original destination', async (t) => {
    if (!requireNetns(t, tools)) return;
    // The server pod's port 9090 is in no Service: egress sends it to the original destination,
    // whose sidecar's ingress delivers it to port 9090 (its original destination port, not 8080).
    const r = await get(client, `http://${SERVER4}:9090/direct`);
    assert.equal(r.status, 200, JSON.stringify(r));
    assert.equal((JSON.parse(r.body) as { port: number }).port, 9090);
  });

  test('non-HTTP TCP to a Service is forwarded as a stream to an endpoint', async (t) => {
    if (!requireNetns(t, tools)) return;
    // A Redis-style (RESP) client speaks first with bytes no HTTP request starts with.
    const r = await client.exec([node, app, 'tcp', '10.96.0.30', '5000', '*1 $4 PING'], {
      uid: APP_UID,
      timeoutMs: 15_000,
    });
    assert.equal(r.stdout.trim(), 'PONG server *1 $4 PING');
  });

  // Redis inline commands ("PING 42", "SET k v") start like an HTTP method; only a full request
  // line (" HTTP/1.x" at its end) may make the sniffer choose HTTP.
  test('a client-first text protocol whose first word looks like a method is still a stream', async (t) => {
    if (!requireNetns(t, tools)) return;
    const r = await client.exec([node, app, 'tcp', '10.96.0.30', '5000', 'PING 42'], {
      uid: APP_UID,
      timeoutMs: 15_000,
    });
    assert.equal(r.stdout.trim(), 'PONG server PING 42');
  });

  test('a request straight to the egress listener is refused, not looped', async (t) => {
    if (!requireNetns(t, tools)) return;
    // Not redirected (loopback is exempt from capture): no original destination, so no route.
    const r = await get(client, 'http://127.0.0.1:7400/', '127.0.0.1:7400');
    assert.equal(r.status, 421, JSON.stringify(r));
    assert.equal(r.headers['x-outrigger-error'], 'misdirected');
  });

  test("a connection straight to another pod's ingress port is refused, not delivered to its loopback", async (t) => {
    if (!requireNetns(t, tools)) return;
    // Its original destination is the ingress listener itself: nothing the pod's app serves.
    const r = await get(client, `http://${SERVER4}:7401/direct`);
    assert.equal(r.status, 421, JSON.stringify(r));
    assert.equal(r.headers['x-outrigger-error'], 'misdirected');
  });

  test("both sidecars counted the Service's requests in their metrics", async (t) => {
    if (!requireNetns(t, tools)) return;
    // At least the IPv4 ClusterIP request and the passthrough one, on each side.
    const egress = requestCount(await metrics(client), { direction: 'egress', status: '200' });
    const ingress = requestCount(await metrics(server), { direction: 'ingress', status: '200' });
    assert.ok(egress >= 2, `egress 200s: ${egress}`);
    assert.ok(ingress >= 2, `ingress 200s: ${ingress}`);
    const web = requestCount(await metrics(client), {
      direction: 'egress',
      service: 'demo/web',
      status: '200',
    });
    assert.ok(web >= 1, `egress 200s attributed to demo/web: ${web}`);
  });
});

// The same pods, but each sidecar discovers the Service from a REAL kube-apiserver with its own
// service-account token (in-cluster mode: KUBERNETES_SERVICE_HOST/PORT and a kubelet-style token
// directory), reached inside the namespaces through a Unix-socket bridge. Then the API server is
// stopped and the ClusterIP keeps working from last-known-good data.
describe('transparent mode end to end with the real API server', { concurrency: 1 }, () => {
  const API_PORT_IN_POD = 6443;
  let cluster: TestCluster | undefined;
  let pods: Pods | undefined;
  const bridges: Bridge[] = [];
  let clusterIP = '';

  after(async () => {
    for (const b of bridges) await b.close();
    await pods?.remove();
    await cluster?.stop();
  });

  test('a ClusterIP from the API server is routed through both sidecars, also while the API server is down', async (t) => {
    if (!requireNetns(t, tools)) return;
    cluster = await startCluster(t);
    if (!cluster) return;
    const c = cluster;
    const ns = await c.admin.createNamespace('transparent');
    const svc = await c.admin.apply<{ spec: { clusterIP: string } }>({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: ns },
      spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }] },
    });
    clusterIP = svc.spec.clusterIP;
    await c.admin.apply({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'web-a', namespace: ns, labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: [SERVER4], conditions: { ready: true } }],
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    });
    await c.admin.createServiceAccount(ns, 'app');
    await c.admin.bindSidecarRole(ns, 'app');
    const token = await c.admin.mintToken(ns, 'app');
    const api = new URL(c.server);

    pods = await startPods(
      (dir) => {
        const tokenDir = path.join(dir, 'serviceaccount');
        writeTokenDir(tokenDir, { token, caPem: c.caPem, namespace: ns });
        chownTree(tokenDir, PROXY_UID); // kubelet's fsGroup: the token is the sidecar's to read
        return ['--token-dir', tokenDir];
      },
      {
        env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(API_PORT_IN_POD) },
        prepare: async ({ client, server }) => {
          for (const pod of [client, server])
            bridges.push(
              await bridgeIntoNetns(pod, { host: api.hostname, port: Number(api.port) }, API_PORT_IN_POD),
            );
        },
      },
    );
    const { client } = pods;

    // The first request may wait for the sidecar's first sync of the Service (bounded retries).
    let first: Reply | undefined;
    for (let i = 0; i < 20 && first?.status !== 200; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 250));
      first = await get(client, `http://${clusterIP}/first`);
    }
    assert.equal(first?.status, 200, JSON.stringify(first));
    assert.equal((JSON.parse(first.body) as { pod: string }).pod, 'server');

    await c.apiserverStop();
    for (let i = 0; i < 5; i++) {
      const r = await get(client, `http://${clusterIP}/outage-${i}`);
      assert.equal(r.status, 200, `during the outage: ${JSON.stringify(r)}`);
      assert.equal((JSON.parse(r.body) as { url: string }).url, `/outage-${i}`);
    }
    const m = await metrics(client);
    assert.ok(
      requestCount(m, { direction: 'egress', service: `${ns}/web`, status: '200' }) >= 6,
      'every request was routed as the Service, not passed through',
    );
  });
});

function chownTree(dir: string, uid: number): void {
  chownSync(dir, uid, uid);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory() && !entry.isSymbolicLink()) chownTree(p, uid);
    else lchownSync(p, uid, uid);
  }
}
