import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import {
  discoveryCluster,
  endpointsOf,
  freshnessOf,
  key,
  sidecarIdentity,
  startSidecarDiscovery,
  waitFor,
  withFaultProxy,
} from '../harness/discovery.ts';
import type { FaultAction } from '../harness/fault-proxy.ts';
import { endpointProducers } from '../harness/endpoint-producers.ts';

const N = 10;
/** The slice list (not watch) of a namespace: the Services of a namespace share one list. */
const sliceListOf = (ns: string): RegExp => new RegExp(`/namespaces/${ns}/endpointslices\\?(?!.*watch=)`);

/**
 * The Skipper failure (reference/skipper-rules-removed-on-api-fault.txt), reproduced against a real
 * API server: every watch is cut and answered 410, so everything relists; Service reads succeed while
 * the EndpointSlice lists of some Services fail with 500, a reset or a stall. Not one endpoint of
 * any Service may disappear at any moment.
 */
for (const producer of endpointProducers)
  test(`relist with failing EndpointSlice reads (500, reset, stall) and 410 mid-watch removes no endpoint (${producer.name})`, async (t) => {
    const env = await discoveryCluster(t, 'skipper', producer);
    if (!env) return;
    const { cluster, ns } = env;
    const proxy = await withFaultProxy(t, cluster);
    const id = await sidecarIdentity(cluster, ns);
    t.after(() => id.cleanup());
    // svc-0..svc-2 each in a namespace of its own, whose slice list is the one that fails.
    const nsOf: string[] = [];
    for (let i = 0; i < N; i++) {
      const home = i < 3 ? await cluster.admin.createNamespace('skipper') : ns;
      nsOf.push(home);
      await producer.createService(cluster.admin, home, `svc-${i}`, [`10.30.${i}.1`, `10.30.${i}.2`]);
    }
    const { discovery, log } = await startSidecarDiscovery(proxy.url, id.dir, {
      tuning: {
        reflector: {
          listTimeoutMs: 3_000,
          backoff: { initialMs: 200, maxMs: 2_000, factor: 2 },
          relistSpreadMs: 500,
        },
      },
    });
    t.after(() => discovery.close());
    await waitFor('ready', () => discovery.ready());
    const expected = new Map<number, string[]>();
    for (let i = 0; i < N; i++) {
      const r = await discovery.resolve(key(nsOf[i] ?? ns, `svc-${i}`));
      expected.set(i, endpointsOf(r));
      assert.equal(expected.get(i)?.length, 2);
    }

    let checks = 0;
    const assertNothingRemoved = (): void => {
      for (let i = 0; i < N; i++)
        assert.deepEqual(
          endpointsOf(discovery.peek(key(nsOf[i] ?? ns, `svc-${i}`))),
          expected.get(i),
          `svc-${i} lost endpoints`,
        );
      checks++;
    };
    const watchAll = async (ms: number): Promise<void> => {
      const end = Date.now() + ms;
      while (Date.now() < end) {
        assertNothingRemoved();
        await delay(25);
      }
    };

    // Round 1: HTTP 410 on every watch (after the cut), failing slice lists for svc-0..svc-2.
    const failing: FaultAction[] = [500, 'reset', 'stall'];
    failing.forEach((action, i) => proxy.rules.push({ match: sliceListOf(nsOf[i] ?? ns), action }));
    proxy.rules.push({ match: /[?&]watch=1/, action: 410, remaining: 3 * (N + 1) });
    proxy.dropWatches();
    await watchAll(6_000);
    const counts = Object.fromEntries(proxy.counts.faults);
    assert.ok((counts['410'] ?? 0) > 0 && (counts['500'] ?? 0) > 0, JSON.stringify(counts));
    assert.ok((counts.reset ?? 0) > 0 && (counts.stall ?? 0) > 0, JSON.stringify(counts));
    for (let i = 0; i < 3; i++)
      assert.equal(freshnessOf(discovery.peek(key(nsOf[i] ?? ns, `svc-${i}`))), 'stale', `svc-${i}`);

    // Round 2: a 410 ERROR event inside an established watch, while the slice lists still fail.
    proxy.rules.splice(0, proxy.rules.length);
    failing.forEach((action, i) => proxy.rules.push({ match: sliceListOf(nsOf[i] ?? ns), action }));
    proxy.rules.push({ match: /[?&]watch=1/, action: 'gone-event', remaining: N + 1 });
    proxy.dropWatches();
    await watchAll(6_000);
    assert.ok((proxy.counts.faults.get('gone-event') ?? 0) > 0);

    // Faults gone: everything converges to fresh, still with every endpoint.
    proxy.rules.splice(0, proxy.rules.length);
    proxy.releaseStalls();
    await waitFor('all fresh again', () => discovery.status().staleServices === 0, 15_000).catch(
      (e: unknown) => {
        const stale = discovery.status().services.filter((x) => x.freshness.state === 'stale');
        t.diagnostic(JSON.stringify({ stale, open: proxy.openWatchPaths(), rules: proxy.rules.length }));
        t.diagnostic(JSON.stringify(log.lines.slice(-30)));
        throw e;
      },
    );
    assertNothingRemoved();
    t.diagnostic(`${checks} full checks of ${N} Services while relists failed; no endpoint ever removed`);
  });
