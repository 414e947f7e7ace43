import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import {
  createServices,
  discoveryCluster,
  endpointsOf,
  freshnessOf,
  key,
  sidecarIdentity,
  startSidecarDiscovery,
  waitFor,
} from '../harness/discovery.ts';
import { endpointProducers } from '../harness/endpoint-producers.ts';

const SERVICES = 50;
const OUTAGE_MS = 60_000;

// Each producer's own cluster, side by side: the run waits through the two outages at once.
describe('discovery through an API server outage', { concurrency: true }, () => {
  for (const producer of endpointProducers)
    test(`API server outage: 50 Services keep their endpoints, marked stale; a change after restart is seen in seconds (${producer.name})`, async (t) => {
      const env = await discoveryCluster(t, 'outage', producer);
      if (!env) return;
      const { cluster, ns } = env;
      const id = await sidecarIdentity(cluster, ns);
      t.after(() => id.cleanup());
      await createServices(cluster.admin, ns, SERVICES, (i) => [`10.20.${i}.1`, `10.20.${i}.2`], producer);

      const { discovery, log } = await startSidecarDiscovery(cluster.server, id.dir);
      t.after(() => discovery.close());
      await waitFor('ready', () => discovery.ready());
      const before = new Map<number, string[]>();
      for (let i = 0; i < SERVICES; i++) {
        const r = await discovery.resolve(key(ns, `svc-${i}`));
        assert.equal(freshnessOf(r), 'fresh', `svc-${i}`);
        before.set(i, endpointsOf(r));
        assert.deepEqual(before.get(i), [`10.20.${i}.1`, `10.20.${i}.2`]);
      }

      const stopStart = Date.now();
      await cluster.apiserverStop();
      const stoppedAt = Date.now();
      t.diagnostic(`kube-apiserver stopped in ${stoppedAt - stopStart} ms`);
      await waitFor(
        'every Service marked stale',
        () => discovery.status().staleServices === SERVICES,
        15_000,
      );
      let rounds = 0;
      while (Date.now() - stoppedAt < OUTAGE_MS) {
        for (let i = 0; i < SERVICES; i++) {
          const r = await discovery.resolve(key(ns, `svc-${i}`));
          assert.deepEqual(endpointsOf(r), before.get(i), `svc-${i} during the outage`);
          assert.equal(freshnessOf(r), 'stale', `svc-${i} is marked stale`);
          assert.ok(
            r.kind === 'found' && r.freshness.state === 'stale' && r.freshness.syncedAt !== undefined,
          );
        }
        rounds++;
        await delay(5_000);
      }
      assert.equal(discovery.ready(), true, 'stays ready through the outage');
      t.diagnostic(`${rounds} lookup rounds of ${SERVICES} Services during a ${OUTAGE_MS / 1000} s outage`);

      await cluster.apiserverStart();
      const restartedAt = Date.now();
      await producer.setAddresses(cluster.admin, ns, 'svc-7', ['10.99.0.1']);
      const writtenMs = Date.now() - restartedAt;
      // The restarted API server has lost every resourceVersion, so each watch relists, after a random
      // 0-10 s that spreads a fleet's relists (docs/scale.md): seen within 10 s plus the reconnect (and,
      // with the controller, its own reconnect and rolling update).
      const changeMs = await waitFor(
        'the change after restart',
        () => endpointsOf(discovery.peek(key(ns, 'svc-7'))).join() === '10.99.0.1',
        25_000,
      );
      await waitFor('staleness cleared', () => discovery.status().staleServices === 0, 25_000);
      t.diagnostic(
        `change in the slices ${writtenMs} ms after the API server was back, seen ${changeMs} ms later; staleness cleared`,
      );

      const staleLines = log.lines.filter(
        (l) => l.msg === 'discovery data is stale; serving last-known-good',
      );
      const perService = new Map<unknown, number>();
      for (const l of staleLines) perService.set(l.service, (perService.get(l.service) ?? 0) + 1);
      assert.equal(perService.size, SERVICES);
      assert.ok(
        [...perService.values()].every((n) => n === 1),
        'one stale log line per Service per transition',
      );
    });
});
