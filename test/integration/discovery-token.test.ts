import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  createService,
  createSlice,
  discoveryCluster,
  endpointsOf,
  freshnessOf,
  key,
  replaceSliceAddresses,
  startSidecarDiscovery,
  waitFor,
  withFaultProxy,
} from '../harness/discovery.ts';
import { KubeError } from '../harness/kube.ts';
import { rotateToken, writeTokenDir } from '../harness/token-dir.ts';

test('token rotation with the old token invalidated: discovery keeps working without a restart', async (t) => {
  const env = await discoveryCluster(t, 'token');
  if (!env) return;
  const { cluster, ns } = env;
  const proxy = await withFaultProxy(t, cluster);
  const { admin } = cluster;
  await admin.createServiceAccount(ns, 'sidecar');
  await admin.bindSidecarRole(ns, 'sidecar');
  const boundToken = async (secret: string): Promise<string> => {
    await admin.apply({ apiVersion: 'v1', kind: 'Secret', metadata: { name: secret, namespace: ns } });
    return admin.mintToken(ns, 'sidecar', { boundSecretName: secret });
  };
  const invalidate = async (secret: string, token: string): Promise<void> => {
    await admin.delete('Secret', secret, ns);
    await waitFor('the old token to be rejected', async () => {
      try {
        await admin.as(token).request('GET', `/api/v1/namespaces/${ns}/services`);
        return false;
      } catch (e) {
        return e instanceof KubeError && e.status === 401;
      }
    });
  };
  await createService(admin, ns, 'web');
  await createSlice(admin, ns, 'web', 'web-a', ['10.40.0.1']);

  const tokenA = await boundToken('bound-a');
  const root = mkdtempSync(join(tmpdir(), 'outrigger-token-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, 'serviceaccount');
  writeTokenDir(dir, { token: tokenA, caPem: cluster.caPem, namespace: ns });
  const { discovery, log } = await startSidecarDiscovery(proxy.url, dir, {
    tuning: { reflector: { backoff: { initialMs: 200, maxMs: 2_000, factor: 2 } } },
  });
  t.after(() => discovery.close());
  assert.deepEqual(endpointsOf(await discovery.resolve(key(ns, 'web'))), ['10.40.0.1']);

  // 1. The kubelet rotates the file, then the old token dies; every watch reconnects.
  const tokenB = await boundToken('bound-b');
  rotateToken(dir, { token: tokenB, caPem: cluster.caPem, namespace: ns });
  await invalidate('bound-a', tokenA);
  proxy.dropWatches();
  await replaceSliceAddresses(admin, ns, 'web-a', ['10.40.0.2']);
  await waitFor(
    'the change, with the rotated token',
    () => endpointsOf(discovery.peek(key(ns, 'web'))).join() === '10.40.0.2',
  );
  await waitFor('fresh', () => freshnessOf(discovery.peek(key(ns, 'web'))) === 'fresh');

  // 2. The token dies BEFORE the file is rotated: 401s (transient, data kept, stale), then recovery.
  await invalidate('bound-b', tokenB);
  proxy.dropWatches();
  await waitFor('stale after 401s', () => freshnessOf(discovery.peek(key(ns, 'web'))) === 'stale');
  assert.deepEqual(endpointsOf(discovery.peek(key(ns, 'web'))), ['10.40.0.2'], 'a 401 removes nothing');
  const tokenC = await boundToken('bound-c');
  rotateToken(dir, { token: tokenC, caPem: cluster.caPem, namespace: ns });
  await replaceSliceAddresses(admin, ns, 'web-a', ['10.40.0.3']);
  const ms = await waitFor(
    'recovery with the new token',
    () => endpointsOf(discovery.peek(key(ns, 'web'))).join() === '10.40.0.3',
  );
  t.diagnostic(
    `recovered ${ms} ms after the rotation; unauthorized retries: ${discovery.status().counters?.unauthorizedRetries}`,
  );

  const text = JSON.stringify(log.lines);
  for (const tok of [tokenA, tokenB, tokenC])
    assert.ok(!text.includes(tok.split('.')[2] ?? tok), 'a token leaked into logs');
  assert.ok((discovery.status().counters?.tokenExpiresAtMs ?? 0) > Date.now(), 'token expiry exported');
});
