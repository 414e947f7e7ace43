/**
 * Discovery for any command that routes by Service (`outrigger proxy` now, `outrigger gateway`
 * next): the resolver with its last-known-good snapshot, and what the admin API shows of it
 * (readiness detail and metric gauges).
 */
import type { Discovery, DiscoveryConfig } from '../discovery/index.ts';
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
