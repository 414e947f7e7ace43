import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { KubeError } from '../harness/kube.ts';
import { waitFor } from '../harness/discovery.ts';
import { generateMeshCa } from '../harness/mesh.ts';
import { issuerEnv } from '../harness/mesh-issuer.ts';

const NAME = 'outrigger-trust-bundle';
const INJECTION = { 'outrigger.dev/injection': 'enabled' };

test('the issuer keeps the trust bundle in every namespace labelled for injection, with the shipped RBAC', async (t) => {
  const env = await issuerEnv(t, {
    rbac: true,
    // A long resync: what happens fast below happens through the namespace watch and the bundle watch.
    issuer: { bundleNamespaces: 'outrigger.dev/injection=enabled', bundleResyncMs: 600_000 },
  });
  if (!env) return;
  const { admin, metric, trustBundle, ca, issuerToken } = env;
  const bundleIn = async (ns: string): Promise<string | undefined> => {
    try {
      const cm = await admin.get<{ data?: Record<string, string> }>('ConfigMap', NAME, ns);
      return cm.data?.['ca.crt'];
    } catch (e) {
      if (e instanceof KubeError && e.status === 404) return undefined;
      throw e;
    }
  };
  const roots = trustBundle.trim();

  // A namespace labelled for injection gets the bundle (the watch's event, not the resync).
  const shop = await admin.createNamespace('shop', INJECTION);
  await waitFor('the bundle in the labelled namespace', async () => (await bundleIn(shop)) === roots);
  // One that already had a ConfigMap of that name (the manual install) gets its roots replaced,
  // keeping its other keys; labelling happens after creation (a MODIFIED event).
  const web = await admin.createNamespace('web');
  await admin.apply({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: NAME, namespace: web, labels: { team: 'web' } },
    data: { 'ca.crt': 'stale', note: 'kept' },
  });
  await admin.patch('Namespace', web, undefined, { metadata: { labels: INJECTION } });
  await waitFor('the stale bundle replaced', async () => (await bundleIn(web)) === roots);
  const webMap = await admin.get<{
    data: Record<string, string>;
    metadata: { labels: Record<string, string> };
  }>('ConfigMap', NAME, web);
  assert.equal(webMap.data.note, 'kept');
  assert.equal(webMap.metadata.labels.team, 'web');
  assert.equal(webMap.metadata.labels['app.kubernetes.io/managed-by'], 'outrigger-identity');
  // A namespace that did not opt in gets nothing.
  const plain = await admin.createNamespace('plain');

  // Least privilege: the issuer's own credentials read and change no other ConfigMap.
  const asIssuer = admin.as(issuerToken);
  await admin.apply({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'secrets', namespace: shop },
    data: { a: 'b' },
  });
  for (const attempt of [
    () => asIssuer.get('ConfigMap', 'secrets', shop),
    () => asIssuer.patch('ConfigMap', 'secrets', shop, { data: { a: 'c' } }),
    () => asIssuer.request('GET', `/api/v1/namespaces/${shop}/configmaps`),
    () => asIssuer.delete('ConfigMap', NAME, shop),
  ])
    await assert.rejects(attempt(), (e) => e instanceof KubeError && e.status === 403);

  // A rotation: the CA Secret's roots now hold the old and a new root; every namespace follows.
  const next = generateMeshCa(mkdtempSync(join(tmpdir(), 'outrigger-next-ca-')));
  t.after(() => rmSync(join(next.bundleFile, '..'), { recursive: true, force: true }));
  const rotated = `${roots}\n${readFileSync(next.bundleFile, 'utf8').trim()}`;
  writeFileSync(ca.bundleFile, rotated + '\n');
  // Someone edits a bundle by hand meanwhile: the rotation's round repairs it too.
  await admin.patch('ConfigMap', NAME, shop, { data: { 'ca.crt': 'tampered' } });
  await waitFor(
    'both namespaces to hold the rotated roots',
    async () => (await bundleIn(shop)) === rotated && (await bundleIn(web)) === rotated,
  );
  assert.equal(await bundleIn(plain), undefined);
  assert.equal(await bundleIn(env.ns), undefined);

  assert.equal(await metric('outrigger_issuer_trust_bundle_namespaces'), 2);
  assert.equal(await metric('outrigger_issuer_trust_bundle_current_namespaces'), 2);
  assert.equal(await metric('outrigger_issuer_trust_bundle_writes_total', 'op="create",result="ok"'), 1);
  assert.ok((await metric('outrigger_issuer_trust_bundle_writes_total', 'op="update",result="ok"')) >= 3);
  assert.equal(await metric('outrigger_issuer_trust_bundle_writes_total', 'op="update",result="error"'), 0);
  assert.equal(await metric('outrigger_issuer_trust_bundle_sync_failures_total'), 0);
  assert.equal(env.running.distributor?.view().lastError, undefined);
});
