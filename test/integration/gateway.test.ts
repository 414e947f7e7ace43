// `outrigger gateway` against the real API server, with the fault proxy in front of it, backends on
// pod IPs inside a network namespace, and the gateway's own ServiceAccount and RBAC from
// manifests/gateway (TLS Secrets granted by resourceNames). The seed bug's own setting: an
// Ingress controller must never drop a rule on a transient API fault.
//   1. 40 Ingresses (80 rules) over 4 Services; 500s, resets and stalls on the Ingress, Service and
//      EndpointSlice lists during relists forced by 410s mid-watch: no rule removed, no failed
//      request under steady traffic;
//   2. the API server stopped: no failed request; a gateway restarted during the outage serves
//      every route and certificate from its snapshot;
//   3. the API server back: an Ingress change is applied (the delay is reported).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { startCluster } from '../harness/cluster.ts';
import type { LoadSummary } from '../harness/data-path.ts';
import { waitFor } from '../harness/discovery.ts';
import { startFaultProxy } from '../harness/fault-proxy.ts';
import {
  applyGatewayRbac,
  backendsOf,
  createScenario,
  gatewayPod,
  gatewayManifest,
  gatewayStatus,
  moveH1ToSvc3,
  relistFaults,
  SCENARIO,
  type GatewayPod,
} from '../harness/gateway.ts';
import { requireNetns } from '../harness/netns.ts';
import { repoRoot, testBinaries } from '../harness/tools.ts';

const ROUTES = SCENARIO.routes;

const failures = (s: LoadSummary): string =>
  `${s.failed} of ${s.total} failed; first: ${JSON.stringify(s.failures.slice(0, 5))}`;

/** Polls the route count until stopped; returns the smallest count seen and how many polls. */
function watchRoutes(pod: GatewayPod): { stop(): Promise<{ min: number; polls: number }> } {
  let running = true;
  let min = Number.POSITIVE_INFINITY;
  let polls = 0;
  const loop = (async () => {
    while (running) {
      min = Math.min(min, (await gatewayStatus(pod)).routes);
      polls++;
      await delay(200);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { min, polls };
    },
  };
}

test('gateway: faults, outage and restart keep every route and certificate; changes apply after', async (t) => {
  if (!requireNetns(t)) return;
  const cluster = await startCluster(t);
  if (!cluster) return;
  t.after(() => cluster.stop());
  const admin = cluster.admin;

  await applyGatewayRbac(admin);

  await t.test('kubectl apply --dry-run=server -k manifests/gateway and its example', () => {
    const kubectl = testBinaries().kubectl;
    assert.ok(kubectl && existsSync(kubectl), 'kubectl is built with the test cluster');
    const run = (args: string[]) => {
      const r = spawnSync(kubectl, ['--kubeconfig', cluster.kubeconfigPath, ...args], {
        cwd: repoRoot,
        encoding: 'utf8',
      });
      return { status: r.status, out: `${r.stdout}${r.stderr}` };
    };
    const gw = run(['apply', '--dry-run=server', '-k', 'manifests/gateway']);
    assert.equal(gw.status, 0, gw.out);
    for (const kind of [
      'deployment.apps',
      'poddisruptionbudget.policy',
      'service',
      'ingressclass.networking.k8s.io',
    ])
      assert.match(
        gw.out,
        new RegExp(`${kind.replaceAll('.', '\\.')}/[^ ]+ (created|configured|unchanged)`),
        kind,
      );
    // A dry-run Namespace is not created: the example's namespace is created for real first.
    assert.equal(run(['create', 'namespace', 'gateway-example']).status, 0);
    const ex = run(['apply', '--dry-run=server', '-k', path.join('manifests/gateway/example')]);
    assert.equal(ex.status, 0, ex.out);
  });

  const { ns, urls } = await createScenario(admin);

  const proxy = await startFaultProxy({ target: cluster });
  t.after(() => proxy.stop());
  const pod = await gatewayPod(cluster, proxy.url);
  t.after(() => pod.close());
  for (let k = 0; k < SCENARIO.services; k++) for (const a of backendsOf(k)) await pod.startBackend(a);
  for (const obj of gatewayManifest('status-rbac.yaml')) await admin.apply(obj);
  let gateway = await pod.startGateway(['--publish-status-address', '192.0.2.10']);
  t.after(() => gateway.stop('SIGKILL'));

  await waitFor(
    'gateway ready with every route',
    async () => (await gatewayStatus(pod)).routes === ROUTES,
    30_000,
  );
  // --publish-status-address, with the optional RBAC of manifests/gateway/status-rbac.yaml.
  const published = async (name: string): Promise<unknown> =>
    (await admin.get<{ status?: { loadBalancer?: { ingress?: unknown } } }>('Ingress', name, ns)).status
      ?.loadBalancer?.ingress;
  await waitFor(
    'status.loadBalancer published',
    async () => JSON.stringify(await published(`ing-${SCENARIO.ingresses - 1}`)) === '[{"ip":"192.0.2.10"}]',
  );
  assert.deepEqual(await published('ing-0'), [{ ip: '192.0.2.10' }]);
  const first = await pod.get('http://h1.example.com/api/x');
  assert.equal(first.status, 200, JSON.stringify(first));
  assert.ok(backendsOf(2).includes(first.body), first.body);
  const miss = await pod.get('http://nowhere.example.com/');
  assert.deepEqual([miss.status, miss.error], [404, 'no_route']);
  assert.equal(await pod.certificateFor('h0.example.com'), 'h0.example.com');
  assert.equal(await pod.certificateFor('other.example.com'), 'default.gateway');

  await t.test(
    '500s, resets and stalls on relists forced by 410s: no rule removed, no request failed',
    async () => {
      const routes = watchRoutes(pod);
      const traffic = pod.load(20, 14_000, urls);
      await relistFaults(proxy);
      const summary = await traffic;
      const seen = await routes.stop();
      t.diagnostic(
        `faults: ${JSON.stringify(Object.fromEntries(proxy.counts.faults))}; ${summary.total} requests, ${seen.polls} route checks, fewest routes seen ${seen.min}`,
      );
      assert.ok((proxy.counts.faults.get('gone-event') ?? 0) > 0 && (proxy.counts.faults.get(500) ?? 0) > 0);
      assert.ok((proxy.counts.faults.get('reset') ?? 0) > 0 && (proxy.counts.faults.get('stall') ?? 0) > 0);
      assert.equal(summary.failed, 0, failures(summary));
      assert.equal(seen.min, ROUTES);
      assert.equal(await pod.certificateFor('h0.example.com'), 'h0.example.com');
      await waitFor('fresh again', async () => (await gatewayStatus(pod)).stale.length === 0, 30_000);
    },
  );

  await t.test(
    'API server down: no failed request; restarted gateway serves every route and certificate from its snapshot',
    async () => {
      await waitFor(
        'snapshots written',
        () => ['gateway.snap', 'services.snap'].every((f) => existsSync(path.join(pod.snapshotDir, f))),
        15_000,
      );
      await delay(2_500); // the debounced writer has caught up with the last change
      await cluster.apiserverStop();
      const during = await pod.load(20, 4_000, urls);
      assert.equal(during.failed, 0, failures(during));
      await gateway.stop('SIGTERM');
      gateway = await pod.startGateway();
      await waitFor(
        'restarted gateway ready',
        async () => (await pod.admin('/readyz')).status === 200,
        30_000,
      );
      const status = await gatewayStatus(pod);
      assert.equal(status.routes, ROUTES);
      assert.ok(status.stale.length > 0, 'served as stale during the outage');
      assert.equal(await pod.certificateFor('h0.example.com'), 'h0.example.com');
      assert.equal(await pod.certificateFor('other.example.com'), 'default.gateway');
      assert.equal(await pod.certificateFor(''), 'default.gateway');
      const after = await pod.load(20, 4_000, urls);
      assert.equal(after.failed, 0, failures(after));
      assert.equal(Object.keys(after.servedBy).length, urls.length, 'every route answered');
    },
  );

  await t.test('API server back: an Ingress change is applied', async () => {
    await cluster.apiserverStart();
    const back = Date.now();
    await moveH1ToSvc3(admin, ns);
    const patched = Date.now();
    const applied = await waitFor(
      'the change served',
      async () => backendsOf(3).includes((await pod.get('http://h1.example.com/')).body),
      30_000,
    );
    t.diagnostic(
      `change served ${Date.now() - back} ms after the API server answered again (${applied} ms after the patch was accepted, at ${patched - back} ms)`,
    );
    await waitFor('fresh', async () => (await gatewayStatus(pod)).stale.length === 0, 30_000);
  });
});
