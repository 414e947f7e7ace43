import type {
  DiscoveryStatus,
  Resolution,
  Resolver,
  ServiceInfo,
  ServiceKey,
} from '../../src/discovery/types.ts';
import { keyString } from '../../src/discovery/types.ts';

/** A Resolver over fixed data, for unit tests of routing, balancing and the proxy. */
export class FakeResolver implements Resolver {
  readonly services = new Map<string, { service: ServiceInfo; stale: boolean }>();
  readonly absent = new Set<string>();
  isReady = true;

  set(service: ServiceInfo, stale = false): void {
    this.services.set(keyString(service.key), { service, stale });
  }

  resolve(key: ServiceKey): Promise<Resolution> {
    return Promise.resolve(this.peek(key));
  }

  resolveNow(key: ServiceKey): Resolution | undefined {
    const r = this.peek(key);
    return r.kind === 'found' ? r : undefined;
  }

  peek(key: ServiceKey): Resolution {
    const k = keyString(key);
    const hit = this.services.get(k);
    if (hit) {
      const freshness = hit.stale
        ? { state: 'stale' as const, since: 0, reason: 'fake' }
        : { state: 'fresh' as const, syncedAt: 0 };
      return { kind: 'found', service: hit.service, freshness, source: 'api' };
    }
    return this.absent.has(k) ? { kind: 'absent' } : { kind: 'unknown', reason: 'not in fake' };
  }

  byClusterIP(ip: string): ServiceKey | undefined {
    for (const { service } of this.services.values()) if (service.clusterIPs.includes(ip)) return service.key;
    return undefined;
  }

  ready(): boolean {
    return this.isReady;
  }

  status(): DiscoveryStatus {
    return {
      ready: this.isReady,
      subscriptions: this.services.size,
      watches: 0,
      staleServices: 0,
      services: [],
    };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
