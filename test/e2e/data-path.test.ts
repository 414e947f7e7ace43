// The explicit-mode data path against the real API server, in a network-namespace "pod" whose pod
// range (10.244.0.0/24) is local: app (load generator, HTTP_PROXY-style) -> egress sidecar ->
// backends on pod IPs listed in real EndpointSlices. The three claims:
//   1. zero failed requests while the API server is stopped for 60 s, steady traffic to 3 Services;
//   2. a sidecar restarted while the API server is down routes from its snapshot, zero failures;
//   3. a rolling replacement of backends (new ready, old terminating, then gone): zero failures.
import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestCluster } from '../harness/cluster.ts';
import { podEnv, suiteCluster, type LoadSummary, type PodEnv } from '../harness/data-path.ts';
import { createService, createSlice, waitFor } from '../harness/discovery.ts';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createNetns, linkNetns, waitForPort } from '../harness/netns.ts';
import { repoRoot } from '../harness/tools.ts';

const OUTAGE_MS = 60_000;
const SERVICES = ['alpha', 'beta', 'gamma'];

const describeFailures = (s: LoadSummary): string =>
  `${s.failed} of ${s.total} failed; first: ${JSON.stringify(s.failures.slice(0, 5))}`;

async function readyz(pod: PodEnv): Promise<number> {
  return (await pod.admin('/readyz')).status;
}

describe('data path e2e (explicit capture, real API server)', { concurrency: 1 }, () => {
  let cluster: TestCluster | undefined;
  const suite = suiteCluster();
  const clusterFor = async (t: TestContext): Promise<TestCluster | undefined> => (cluster = await suite(t));

  /** Three Services with two backends each: 10.244.0.1x (alpha), 2x (beta), 3x (gamma). */
  async function threeServices(pod: PodEnv): Promise<string[]> {
    const urls: string[] = [];
    for (const [i, name] of SERVICES.entries()) {
      const addresses = [`10.244.0.${(i + 1) * 10 + 1}`, `10.244.0.${(i + 1) * 10 + 2}`];
      for (const a of addresses) await pod.startBackend(a);
      await createService(cluster!.admin, pod.namespace, name);
      await createSlice(cluster!.admin, pod.namespace, name, `${name}-1`, addresses);
      urls.push(`http://${name}.${pod.namespace}/`);
    }
    return urls;
  }

  test('zero failed requests while the API server is stopped for 60 s (3 Services, steady traffic)', async (t) => {
    const c = await clusterFor(t);
    if (!c) return;
    const pod = await podEnv(c, await c.admin.createNamespace('dp-outage'));
    t.after(() => pod.close());
    const urls = await threeServices(pod);
    await pod.startSidecar();
    await waitFor('sidecar ready', async () => (await readyz(pod)) === 200, 30_000);

    // 10 requests/s for outage + 20 s: 5 s warm, 60 s outage, the restart and 10 s after.
    const traffic = pod.load(100, OUTAGE_MS + 20_000, urls);
    await delay(5_000);
    await c.apiserverStop();
    const outageStarted = Date.now();
    let readyDuringOutage = true;
    while (Date.now() - outageStarted < OUTAGE_MS) {
      if ((await readyz(pod)) !== 200) readyDuringOutage = false;
      await delay(5_000);
    }
    const discovery = await pod.admin('/debug/discovery');
    await c.apiserverStart();
    const summary = await traffic;

    t.diagnostic(`outage: ${summary.total} requests, ${summary.failed} failed`);
    assert.equal(summary.failed, 0, describeFailures(summary));
    assert.ok(summary.total >= 700, `steady traffic: ${summary.total} requests`);
    assert.equal(readyDuringOutage, true, 'readiness stays latched through the outage');
    assert.match(discovery.body, /"state": "stale"/, 'the outage is visible as staleness');
    for (const url of urls)
      assert.equal(Object.keys(summary.servedBy[url] ?? {}).length, 2, `${url} balanced`);
  });

  test('a sidecar restarted while the API server is down routes from its snapshot', async (t) => {
    const c = await clusterFor(t);
    if (!c) return;
    await c.apiserverStart().catch(() => undefined);
    const pod = await podEnv(c, await c.admin.createNamespace('dp-restart'));
    t.after(() => pod.close());
    const urls = await threeServices(pod);
    const first = await pod.startSidecar();
    await waitFor('sidecar ready', async () => (await readyz(pod)) === 200, 30_000);
    // Look every Service up once so that it is subscribed and lands in the snapshot.
    const warm = await pod.load(50, 2_000, urls);
    assert.equal(warm.failed, 0, describeFailures(warm));
    await delay(2_000); // the snapshot write is debounced

    await c.apiserverStop();
    await first.stop('SIGKILL');
    const second = await pod.startSidecar();
    await waitFor(
      'restarted sidecar ready from its snapshot',
      async () => (await readyz(pod)) === 200,
      30_000,
    );
    const summary = await pod.load(50, 10_000, urls);
    await c.apiserverStart();

    t.diagnostic(`restart from snapshot: ${summary.total} requests, ${summary.failed} failed`);
    assert.equal(summary.failed, 0, describeFailures(summary) + '\n' + second.output().slice(-2_000));
    assert.ok(summary.total >= 150);
    for (const url of urls) assert.ok(summary.servedBy[url], `${url} served`);
  });

  test('a rolling replacement of backends under steady traffic fails no request', async (t) => {
    const c = await clusterFor(t);
    if (!c) return;
    await c.apiserverStart().catch(() => undefined);
    const ns = await c.admin.createNamespace('dp-rolling');
    const pod = await podEnv(c, ns);
    t.after(() => pod.close());
    const old = ['10.244.0.101', '10.244.0.102'];
    const fresh = ['10.244.0.111', '10.244.0.112'];
    const oldProcs = await Promise.all(old.map((a) => pod.startBackend(a)));
    await createService(c.admin, ns, 'web');
    await createSlice(c.admin, ns, 'web', 'web-1', old);
    await pod.startSidecar();
    await waitFor('sidecar ready', async () => (await readyz(pod)) === 200, 30_000);
    const url = `http://web.${ns}/`;

    const traffic = pod.load(20, 20_000, [url]);
    await delay(3_000);
    // The Deployment controller's order: new pods become ready, old ones go terminating...
    for (const a of fresh) await pod.startBackend(a);
    const ep = (a: string, ready: boolean) => ({
      addresses: [a],
      conditions: { ready, serving: true, terminating: !ready },
    });
    await c.admin.patch('EndpointSlice', 'web-1', ns, {
      endpoints: [...old.map((a) => ep(a, false)), ...fresh.map((a) => ep(a, true))],
    });
    await delay(3_000); // the watch delivers the update; traffic moves to the new endpoints
    // ...the old pods get SIGTERM and drain, and finally leave the slice.
    await Promise.all(oldProcs.map((p) => pod.stopBackend(p)));
    await c.admin.patch('EndpointSlice', 'web-1', ns, { endpoints: fresh.map((a) => ep(a, true)) });
    const summary = await traffic;

    t.diagnostic(
      `rolling: ${summary.total} requests, ${summary.failed} failed, served ${JSON.stringify(summary.servedBy[url])}`,
    );
    assert.equal(summary.failed, 0, describeFailures(summary));
    const served = summary.servedBy[url] ?? {};
    for (const a of [...old, ...fresh])
      assert.ok((served[a] ?? 0) > 0, `${a} served requests: ${JSON.stringify(served)}`);
  });

  test('two hops: app -> egress sidecar -> [veth] -> ingress sidecar of the server pod -> backend', async (t) => {
    const c = await clusterFor(t);
    if (!c) return;
    await c.apiserverStart().catch(() => undefined);
    const ns = await c.admin.createNamespace('dp-twohop');
    const client = await podEnv(c, ns);
    t.after(() => client.close());
    const server = await createNetns('dpserver', { t });
    await linkNetns(client.ns, server, { a: ['10.244.1.1/24'], b: ['10.244.1.2/24'] });
    // The server pod: its app on localhost:8080 and its sidecar's ingress on :7401. Its own
    // discovery is an empty file: ingress needs none.
    const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-twohop-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(path.join(dir, 'empty.yaml'), '');
    server.spawn([
      process.execPath,
      path.join(repoRoot, 'test/harness/data-path-backend.ts'),
      '127.0.0.1:8080',
    ]);
    server.spawn([
      process.execPath,
      path.join(repoRoot, 'src/main.ts'),
      'proxy',
      '--capture',
      'explicit',
      '--source',
      `file:${path.join(dir, 'empty.yaml')}`,
      '--namespace',
      ns,
      '--app-port',
      '8080',
      '--trace-sampling',
      '0',
    ]);
    await waitForPort(server, '127.0.0.1', 8080, 15_000);
    await waitForPort(server, '10.244.1.2', 7401, 30_000);
    // The Service's endpoint is the server pod's ingress port, as a meshed Service's targetPort is.
    await createService(c.admin, ns, 'remote');
    await c.admin.apply({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'remote-1', namespace: ns, labels: { 'kubernetes.io/service-name': 'remote' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.244.1.2'], conditions: { ready: true } }],
      ports: [{ name: 'http', port: 7401, protocol: 'TCP' }],
    });
    await client.startSidecar();
    await waitFor('client sidecar ready', async () => (await readyz(client)) === 200, 30_000);
    const url = `http://remote.${ns}/`;
    const summary = await client.load(50, 3_000, [url]);
    t.diagnostic(`two hops: ${summary.total} requests, ${summary.failed} failed`);
    assert.equal(summary.failed, 0, describeFailures(summary));
    assert.deepEqual(Object.keys(summary.servedBy[url] ?? {}), ['127.0.0.1'], 'the server pod app answered');
    const probe = `fetch('http://127.0.0.1:7402/metrics').then(r => r.text()).then(t => process.stdout.write(t))`;
    const metrics = (await server.exec([process.execPath, '-e', probe], { timeoutMs: 15_000 })).stdout;
    const line = metrics
      .split('\n')
      .find(
        (l) => l.startsWith('outrigger_requests_total{direction="ingress"') && l.includes('status="200"'),
      );
    assert.ok(line && Number(line.split(' ').at(-1)) >= summary.total, `server ingress counted: ${line}`);
  });
});
