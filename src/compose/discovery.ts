/**
 * Discovery for any command that routes by Service (`outrigger proxy` now, `outrigger gateway`
 * next): the resolver with its last-known-good snapshot, and what the admin API shows of it
 * (readiness detail and metric gauges).
 */
import type { Config } from '../config/options.ts';
import type { Discovery, DiscoveryConfig } from '../discovery/index.ts';
import type { MeshRoutes } from '../routing/mesh-routes.ts';
import { OutriggerError } from '../shared/errors.ts';
import type { DiscoveryStatus } from '../discovery/types.ts';
import type { Clock, Random } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';

/** The file or API resolver the configuration names; the snapshot comes with the API one. */
export async function openDiscovery(
  config: DiscoveryConfig,
  deps: { clock: Clock; random: Random; log: Logger; env: Record<string, string | undefined> },
): Promise<Discovery> {
  // Loaded here, not at the top: createDataPath's users (the demo, tests) need no discovery factory.
  const { createDiscovery } = await import('../discovery/index.ts');
  return createDiscovery(config, { clock: deps.clock, random: deps.random, logger: deps.log, env: deps.env });
}

/**
 * --mesh-routes: the HTTPRoutes and GRPCRoutes attached to Services, read on discovery's API
 * connection; undefined when off. A route that names a Service and cannot be applied is logged
 * once (the sidecar writes no route status) and listed in /debug/routes.
 */
export async function openMeshRoutes(
  config: Pick<Config, 'meshRoutes'>,
  discovery: Discovery,
  clock: Clock,
  log: Logger,
): Promise<MeshRoutes | undefined> {
  if (!config.meshRoutes) return undefined;
  if (!discovery.reflectors)
    throw new OutriggerError(
      'config_invalid',
      '--mesh-routes needs the Kubernetes API source: routes are read from the API (unset --source)',
    );
  const { MeshRoutes } = await import('../routing/mesh-routes.ts');
  // Every backend a route names is subscribed at once: the first call does not wait for it, and
  // the snapshot holds it, as it holds the routes. kept.snapshot is set once the snapshot has
  // handed its routes over (their load builds the first table).
  const kept: { snapshot?: { changed(): void } } = {};
  let rejected = new Set<string>();
  const routes = new MeshRoutes(
    discovery.reflectors,
    () => clock.now(),
    (table) => {
      kept.snapshot?.changed();
      const now = new Set<string>();
      for (const r of table.rejected()) {
        const key = `${r.kind} ${r.route} ${r.reason}`;
        now.add(key);
        if (!rejected.has(key)) log.warn('mesh route not applied', { ...r });
      }
      rejected = now;
      for (const key of table.backends()) {
        const [namespace = '', name = ''] = key.split('/');
        void discovery.resolve({ namespace, name }, { waitMs: 0 });
      }
    },
  );
  kept.snapshot = discovery.keepInSnapshot?.({
    collect: () => routes.collect(),
    load: (t) => routes.load(t),
  });
  routes.start();
  return routes;
}

/** Discovery's part of the /readyz detail. */
export function discoveryReadiness(s: DiscoveryStatus) {
  return {
    ready: s.ready,
    subscriptions: s.subscriptions,
    watches: s.watches,
    staleServices: s.staleServices,
  };
}

/** Discovery's metric gauges, including how long the oldest stale Service has been stale. */
export function discoveryGauges(s: DiscoveryStatus, now: number) {
  let oldest = now;
  for (const svc of s.services)
    if (svc.freshness.state === 'stale') oldest = Math.min(oldest, svc.freshness.since);
  return { ...discoveryReadiness(s), oldestStaleSeconds: (now - oldest) / 1000 };
}
