import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseTarget } from '../../../src/cli/resolve.ts';
import { createDiscovery } from '../../../src/discovery/index.ts';
import { isOutriggerError } from '../../../src/shared/errors.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const base = {
  kubeconfig: undefined,
  tokenDir: '/nonexistent',
  namespace: undefined,
  capture: 'transparent' as const,
  maxWatches: 10,
  snapshot: undefined,
};
const deps = () => ({ clock: new FakeClock(), random: () => 0.5, logger: memoryLogger(), env: {} });

test('in-cluster discovery without KUBERNETES_SERVICE_HOST/PORT fails, naming them, with no fallback', async () => {
  await assert.rejects(
    createDiscovery({ ...base, source: { kind: 'kube' } }, deps()),
    (e: unknown) => isOutriggerError(e, 'config_invalid') && /KUBERNETES_SERVICE_HOST/.test(e.message),
  );
});

test('in-cluster discovery with an unreadable token directory is identity_unavailable', async () => {
  await assert.rejects(
    createDiscovery(
      { ...base, source: { kind: 'kube' } },
      { ...deps(), env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: '6443' } },
    ),
    (e: unknown) => isOutriggerError(e, 'identity_unavailable'),
  );
});

test('--source file:PATH gives the file resolver, short names in --namespace', async () => {
  const path = join(import.meta.dirname, '../../golden/discovery/named-targetport.yaml');
  const d = await createDiscovery({ ...base, namespace: 'shop', source: { kind: 'file', path } }, deps());
  try {
    assert.equal(d.namespace, 'shop');
    const r = await d.resolve({ namespace: 'shop', name: 'web' });
    assert.equal(r.kind === 'found' && r.source, 'file');
  } finally {
    await d.close();
  }
});

test('outrigger resolve targets: names, namespaces, FQDNs and ports', () => {
  assert.deepEqual(parseTarget('web', 'shop', 'cluster.local'), { key: { namespace: 'shop', name: 'web' } });
  assert.deepEqual(parseTarget('web.prod:8080', 'shop', 'cluster.local'), {
    key: { namespace: 'prod', name: 'web' },
    port: '8080',
  });
  assert.deepEqual(parseTarget('web.prod.svc.cluster.local:http', 'shop', 'cluster.local'), {
    key: { namespace: 'prod', name: 'web' },
    port: 'http',
  });
  assert.throws(
    () => parseTarget('10.0.0.1:80', 'shop', 'cluster.local'),
    (e: unknown) => isOutriggerError(e, 'config_invalid'),
  );
  assert.throws(() => parseTarget('a.b.c.d.e.f', 'shop', 'cluster.local'), /not a Service name/);
});
