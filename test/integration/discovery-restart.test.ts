import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  createServices,
  discoveryCluster,
  endpointsOf,
  freshnessOf,
  key,
  sidecarIdentity,
  startSidecarDiscovery,
} from '../harness/discovery.ts';
import { endpointProducers } from '../harness/endpoint-producers.ts';

for (const producer of endpointProducers)
  test(`a sidecar restarted during an outage routes from its snapshot; a corrupt one warns once and reports no data (${producer.name})`, async (t) => {
    const env = await discoveryCluster(t, 'restart', producer);
    if (!env) return;
    const { cluster, ns } = env;
    const id = await sidecarIdentity(cluster, ns);
    t.after(() => id.cleanup());
    const snapshot = join(id.dir, '..', 'snapshot.pb');
    await createServices(cluster.admin, ns, 5, (i) => [`10.50.${i}.1`], producer);

    const first = await startSidecarDiscovery(cluster.server, id.dir, { snapshot });
    const clusterIPs = new Map<number, string>();
    for (let i = 0; i < 5; i++) {
      const r = await first.discovery.resolve(key(ns, `svc-${i}`));
      assert.deepEqual(endpointsOf(r), [`10.50.${i}.1`]);
      clusterIPs.set(i, r.kind === 'found' ? (r.service.clusterIPs[0] ?? '') : '');
    }
    await first.discovery.close();

    await cluster.apiserverStop();
    const second = await startSidecarDiscovery(cluster.server, id.dir, { snapshot });
    assert.equal(second.discovery.ready(), true, 'ready from the snapshot, before any sync');
    for (let i = 0; i < 5; i++) {
      const r = await second.discovery.resolve(key(ns, `svc-${i}`), { waitMs: 0 });
      assert.deepEqual(endpointsOf(r), [`10.50.${i}.1`], `svc-${i}`);
      assert.equal(freshnessOf(r), 'stale');
      assert.equal(r.kind === 'found' && r.source, 'snapshot');
      assert.deepEqual(second.discovery.byClusterIP(clusterIPs.get(i) ?? ''), key(ns, `svc-${i}`));
    }
    await second.discovery.close();

    const bytes = readFileSync(snapshot);
    writeFileSync(snapshot, bytes.subarray(0, Math.floor(bytes.length / 2)));
    const third = await startSidecarDiscovery(cluster.server, id.dir, { snapshot });
    t.after(() => third.discovery.close());
    assert.equal(third.discovery.ready(), false);
    const r = await third.discovery.resolve(key(ns, 'svc-0'), { waitMs: 300 });
    assert.equal(r.kind, 'unknown');
    const warnings = third.log.lines.filter((l) => l.msg === 'snapshot ignored');
    assert.equal(warnings.length, 1);
    assert.match(String(warnings[0]?.reason), /checksum|truncated/);
  });
