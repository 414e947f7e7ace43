import type { Logger } from '../shared/log.ts';
import type { DiscoveryStatus, Freshness, Resolution, ServiceInfo } from './types.ts';
import { keyString } from './types.ts';

export type Source = 'api' | 'snapshot' | 'file' | 'cold';

/** One Service's last-known-good data and how fresh it is. */
export interface Known {
  info: ServiceInfo;
  source: Source;
  syncedAt?: number;
  /** Set while stale: when it went stale and why. */
  stale?: { since: number; reason: string };
}

export function freshnessOf(k: Known): Freshness {
  if (k.stale) {
    const f: Freshness = { state: 'stale', since: k.stale.since, reason: k.stale.reason };
    if (k.syncedAt !== undefined) f.syncedAt = k.syncedAt;
    return f;
  }
  return { state: 'fresh', syncedAt: k.syncedAt ?? 0 };
}

export function found(k: Known): Resolution {
  return { kind: 'found', service: k.info, freshness: freshnessOf(k), source: k.source };
}

export const endpointCount = (info: ServiceInfo): number => {
  let n = 0;
  for (const list of info.endpoints.values()) n += list.length;
  return n;
};

/**
 * Marks stale and logs once per transition (fresh -> stale), never per retry: an outage of an
 * hour with a 30 s backoff must not write thousands of lines per Service.
 */
export function markStale(k: Known, now: number, reason: string, log: Logger): void {
  if (k.stale) return;
  k.stale = { since: now, reason };
  log.warn('discovery data is stale; serving last-known-good', {
    service: keyString(k.info.key),
    reason,
    ...(k.syncedAt !== undefined ? { lastSyncAgoMs: now - k.syncedAt } : {}),
  });
}

export function markFresh(k: Known, now: number, log: Logger): void {
  if (k.stale)
    log.info('discovery data is fresh again', {
      service: keyString(k.info.key),
      staleForMs: now - k.stale.since,
    });
  delete k.stale;
  k.syncedAt = now;
}

export function statusOf(
  known: Iterable<Known>,
  extra: { ready: boolean; subscriptions: number; watches: number },
): DiscoveryStatus {
  const services: DiscoveryStatus['services'] = [];
  let staleServices = 0;
  for (const k of known) {
    if (k.stale) staleServices++;
    services.push({
      key: keyString(k.info.key),
      freshness: freshnessOf(k),
      endpoints: endpointCount(k.info),
      source: k.source,
    });
  }
  services.sort((a, b) => (a.key < b.key ? -1 : 1));
  return { ...extra, staleServices, services };
}
