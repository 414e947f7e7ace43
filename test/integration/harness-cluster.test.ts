import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startCluster } from '../harness/cluster.ts';
import { KubeError } from '../harness/kube.ts';
import { openWatch } from '../harness/watch.ts';

const svc = (namespace: string, name: string): Record<string, unknown> => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace },
  spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
});

test(
  'the real API server enforces the sidecar ClusterRole for a TokenRequest token',
  { timeout: 180_000 },
  async (t) => {
    const cluster = await startCluster(t);
    if (!cluster) return;
    t.after(() => cluster.stop());
    const { admin } = cluster;
    const ns = await admin.createNamespace('rbac');
    await admin.createServiceAccount(ns, 'app');
    await admin.bindSidecarRole(ns, 'app');
    const token = await admin.mintToken(ns, 'app', { expirationSeconds: 600 });
    assert.equal(token.split('.').length, 3, 'a TokenRequest token is a JWT');
    const sa = admin.as(token);

    await t.test('can list Services and EndpointSlices in any namespace', async () => {
      await admin.apply(svc(ns, 'web'));
      const list = await sa.request<{ items: { metadata: { name: string } }[] }>(
        'GET',
        `/api/v1/namespaces/${ns}/services`,
      );
      assert.deepEqual(
        list.items.map((i) => i.metadata.name),
        ['web'],
      );
      await sa.request('GET', '/apis/discovery.k8s.io/v1/endpointslices?limit=5');
      await sa.request('GET', '/api/v1/services?limit=5');
    });

    await t.test('can watch Services', async () => {
      const w = openWatch(
        cluster.server,
        cluster.caPem,
        token,
        `/api/v1/namespaces/${ns}/services?watch=true`,
      );
      t.after(() => w.close());
      assert.equal(await w.status, 200);
      await admin.apply(svc(ns, 'api'));
      const e = await w.next((ev) => ev.type === 'ADDED' && ev.object.metadata?.name === 'api');
      assert.equal(e.type, 'ADDED');
    });

    await t.test('is forbidden to read Secrets or write Services', async () => {
      for (const [method, path, body] of [
        ['GET', `/api/v1/namespaces/${ns}/secrets`, undefined],
        ['GET', '/api/v1/secrets', undefined],
        ['POST', `/api/v1/namespaces/${ns}/services`, svc(ns, 'nope')],
        ['GET', `/api/v1/namespaces/${ns}/pods`, undefined],
      ] as const) {
        await assert.rejects(
          sa.request(method, path, body),
          (e: unknown) => e instanceof KubeError && e.status === 403,
        );
      }
    });

    await t.test('an unknown token is unauthorized', async () => {
      await assert.rejects(
        admin.as('not-a-token').request('GET', '/api/v1/services'),
        (e: unknown) => e instanceof KubeError && e.status === 401,
      );
    });
  },
);

test(
  'after apiserver-stop/apiserver-start a watch from before the restart expires (410), and a relist resumes with the same data',
  { timeout: 180_000 },
  async (t) => {
    const cluster = await startCluster(t);
    if (!cluster) return;
    t.after(() => cluster.stop());
    const { admin } = cluster;
    const ns = await admin.createNamespace('restart');
    await admin.apply(svc(ns, 'before'));
    const listNames = async (): Promise<{ names: string[]; rv: string }> => {
      const list = await admin.request<{
        metadata: { resourceVersion: string };
        items: { metadata: { name: string } }[];
      }>('GET', `/api/v1/namespaces/${ns}/services`);
      return { names: list.items.map((i) => i.metadata.name).sort(), rv: list.metadata.resourceVersion };
    };
    const watchFrom = (rv: string) =>
      openWatch(
        cluster.server,
        cluster.caPem,
        cluster.adminToken,
        `/api/v1/namespaces/${ns}/services?watch=true&resourceVersion=${rv}`,
      );
    const before = await listNames();

    const first = watchFrom(before.rv);
    assert.equal(await first.status, 200);
    // Any write in the cluster after the list (the API server renews its own lease every few
    // seconds) moves etcd past the list's version; made here so the outcome never rests on timing.
    await admin.apply(svc(await admin.createNamespace('elsewhere'), 'later'));
    await cluster.apiserverStop();
    assert.notEqual(await first.ended, undefined, 'the watch ends when the API server stops');
    await assert.rejects(admin.request('GET', '/version'), /ECONNREFUSED/);

    await cluster.apiserverStart();
    // The restarted watch cache starts at etcd's current revision: older versions are gone.
    const stale = watchFrom(before.rv);
    t.after(() => stale.close());
    assert.equal(await stale.status, 200);
    const expired = await stale.next((e) => e.type === 'ERROR');
    assert.equal(expired.object.code, 410);
    assert.equal(expired.object['reason'], 'Expired');

    const relisted = await listNames();
    assert.deepEqual(relisted.names, ['before'], 'etcd kept the data across the restart');
    const again = watchFrom(relisted.rv);
    t.after(() => again.close());
    assert.equal(await again.status, 200);
    await admin.apply(svc(ns, 'after'));
    await again.next((e) => e.type === 'ADDED' && e.object.metadata?.name === 'after');
    assert.deepEqual((await listNames()).names, ['after', 'before']);
  },
);
