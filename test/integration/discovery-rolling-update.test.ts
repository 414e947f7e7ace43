import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import {
  discoveryCluster,
  endpointsOf,
  key,
  sidecarIdentity,
  startSidecarDiscovery,
  waitFor,
} from '../harness/discovery.ts';
import { controllerSlices, readyAddresses } from '../harness/endpoint-producers.ts';
import { createPod, NODE, podName, setPodStatus, stopPod, ZONE } from '../harness/kubelet.ts';

const ip = (gen: number, k: number): string => `10.70.${gen}.${k + 1}`;

/**
 * Rolling updates as a Deployment does them (surge 1, unavailable 0), written by the real
 * EndpointSlice controller: a new pod is created, turns Ready, then an old pod is deleted (not
 * ready and terminating first, gone after). At every moment the cluster has at least `replicas`
 * ready pods, so the sidecar's view, sampled every 10 ms, must never have fewer.
 */
test('rolling updates through the EndpointSlice controller never drop an endpoint from the sidecar view', async (t) => {
  const env = await discoveryCluster(t, 'rolling', controllerSlices);
  if (!env) return;
  const { cluster, ns } = env;
  const admin = cluster.admin;
  const id = await sidecarIdentity(cluster, ns);
  t.after(() => id.cleanup());

  // web: 3 replicas (one slice); big: 150 (the controller splits them over two slices of <= 100).
  const replicas = { web: 3, big: 150 };
  for (const [name, n] of Object.entries(replicas))
    await controllerSlices.createService(
      admin,
      ns,
      name,
      Array.from({ length: n }, (_, k) => (name === 'web' ? ip(0, k) : `10.71.${k >> 8}.${k & 255}`)),
    );
  const { discovery } = await startSidecarDiscovery(cluster.server, id.dir);
  t.after(() => discovery.close());
  for (const name of Object.keys(replicas))
    await waitFor(`${name} resolved`, async () => {
      const r = await discovery.resolve(key(ns, name));
      return endpointsOf(r).length === replicas[name as keyof typeof replicas];
    });

  // The controller's own shapes: slices of at most 100 endpoints, labelled as its own, and the
  // pod, node and zone of every endpoint reaching the sidecar.
  const slices = await admin.request<{
    items: { metadata: { labels: Record<string, string> }; endpoints: unknown[] }[];
  }>(
    'GET',
    `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices?labelSelector=kubernetes.io/service-name=big`,
  );
  assert.equal(slices.items.length, 2, 'big is split over two slices');
  for (const s of slices.items) {
    assert.ok(s.endpoints.length <= 100);
    assert.equal(
      s.metadata.labels['endpointslice.kubernetes.io/managed-by'],
      'endpointslice-controller.k8s.io',
    );
  }
  const web = discovery.peek(key(ns, 'web'));
  assert.ok(web.kind === 'found');
  for (const e of web.service.endpoints.get('http') ?? []) {
    assert.equal(e.nodeName, NODE);
    assert.equal(e.zone, ZONE);
    assert.equal(e.podName, podName('web', e.address));
  }

  const minSeen = { web: Infinity, big: Infinity };
  let samples = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      for (const name of Object.keys(minSeen) as (keyof typeof minSeen)[])
        minSeen[name] = Math.min(minSeen[name], endpointsOf(discovery.peek(key(ns, name))).length);
      samples++;
      await delay(10);
    }
  })();

  // web: every pod replaced; big: 10 of its pods replaced.
  const rollOne = async (app: string, oldIp: string, newIp: string): Promise<void> => {
    const name = await createPod(admin, ns, app, newIp);
    await setPodStatus(admin, ns, name, newIp, false); // running, not ready yet
    await delay(100);
    await setPodStatus(admin, ns, name, newIp, true);
    await waitFor(`${newIp} in the slices`, async () =>
      (await readyAddresses(admin, ns, app)).includes(newIp),
    );
    await stopPod(admin, ns, podName(app, oldIp), { terminatingMs: 300 });
  };
  for (let k = 0; k < replicas.web; k++) await rollOne('web', ip(0, k), ip(1, k));
  for (let k = 0; k < 10; k++) await rollOne('big', `10.71.0.${k}`, `10.72.0.${k}`);

  const wantWeb = Array.from({ length: replicas.web }, (_, k) => ip(1, k)).sort();
  await waitFor(
    'web has only the new pods',
    () => endpointsOf(discovery.peek(key(ns, 'web'))).join() === wantWeb.join(),
  );
  await waitFor('big has its new pods', () => {
    const eps = endpointsOf(discovery.peek(key(ns, 'big')));
    return eps.length === replicas.big && eps.includes('10.72.0.9') && !eps.includes('10.71.0.9');
  });
  sampling = false;
  await sampler;
  t.diagnostic(`${samples} samples; fewest endpoints seen: web ${minSeen.web}, big ${minSeen.big}`);
  assert.equal(minSeen.web, replicas.web, 'web never lost a ready endpoint');
  assert.equal(minSeen.big, replicas.big, 'big never lost a ready endpoint');
});
