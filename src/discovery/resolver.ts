import { LRUCache } from 'lru-cache';
import type { Clock, Random } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import { ExistenceChecks } from './existence.ts';
import { endpointCount, found, markFresh, markStale, statusOf, type Known } from './freshness.ts';
import type { KubeApi } from '../kube/api.ts';
import type { TransportStats } from '../kube/transport.ts';
import { mergeService } from './merge.ts';
import { NamespaceSlices } from './namespace-slices.ts';
import type { Reflector } from './reflector.ts';
import { reflectorsOf, type NewReflector, type ReflectorTuning } from './reflectors.ts';
import { ServiceSet } from './sinks.ts';
import {
  readSnapshot,
  snapshotWriterOf,
  type SnapshotData,
  type SnapshotPart,
  type SnapshotWriter,
} from './snapshot.ts';
import type { DiscoveryStatus, Resolution, Resolver, ServiceInfo, ServiceKey } from './types.ts';
import { keyString } from './types.ts';

export interface KubeResolverOptions {
  api: KubeApi;
  clock: Clock;
  random: Random;
  logger: Logger;
  /**
   * LRU bound on subscriptions, and so on live watches besides the one fixed Service watch: the
   * subscriptions of a namespace share one EndpointSlice watch, plus, in 'namespace' scope, one
   * Service watch per other namespace in use.
   */
  maxWatches: number;
  /** Subscription changes within this window share one re-watch of their namespace's slices. */
  sliceBatchMs?: number;
  /**
   * 'cluster': one cluster-wide Service watch, which also feeds the ClusterIP index (transparent
   * capture). 'namespace': the home namespace's Service watch, and one per other namespace that
   * has a subscription (explicit mode); a name in another namespace is first checked by one LIST.
   */
  serviceScope: 'cluster' | 'namespace';
  /** Watched from the start in 'namespace' scope, so the sidecar becomes ready before a lookup. */
  homeNamespace?: string;
  /** Byte cap of the cold tier (evicted and snapshot-loaded Services). */
  coldBytes?: number;
  snapshotPath?: string;
  snapshotDebounceMs?: number;
  /** How long resolve() waits for a first answer when nothing is known yet. */
  waitMs?: number;
  /** 'namespace' scope: how long "no such Service" in an unwatched namespace is believed. */
  absentMs?: number;
  reflector?: ReflectorTuning;
  transportStats?: () => TransportStats;
  tokenExpiresAt?: () => number | undefined;
}

export interface KubeResolver extends Resolver {
  /** Writes the snapshot now (tests, shutdown). */
  flushSnapshot(): Promise<void>;
  /**
   * Keeps another component's objects in this snapshot file (a sidecar's mesh routes): loads what
   * the file held into it now, and writes what it collects from then on. Call changed() after a
   * change of its data.
   */
  keepInSnapshot(part: SnapshotPart): { changed(): void };
}

interface Subscription {
  key: string;
  ns: string;
  name: string;
}

const SLICES = (ns: string): string =>
  `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/endpointslices`;
const SERVICES = (ns: string | undefined): string =>
  ns === undefined ? '/api/v1/services' : `/api/v1/namespaces/${encodeURIComponent(ns)}/services`;

/** Rough retained size of a ServiceInfo, for the cold tier's byte cap. */
export function estimateBytes(info: ServiceInfo): number {
  return 400 + info.ports.length * 80 + endpointCount(info) * 160;
}

/**
 * Creates the API-backed Resolver. Loads the snapshot (if configured) BEFORE returning, so the
 * first lookup after a restart during an outage is answered from it (stale).
 */
export async function createKubeResolver(opts: KubeResolverOptions): Promise<KubeResolver> {
  const snapshot = opts.snapshotPath ? await readSnapshot(opts.snapshotPath, opts.logger) : undefined;
  const r = new ApiResolver(opts, snapshot);
  r.start();
  return r;
}

/**
 * Last-known-good rules (docs/discovery.md): a Service's data is recomputed only when BOTH its
 * Service (from a listed ServiceSet) and its slices (from a listed SliceSet) come from complete
 * lists plus watch events; a failure anywhere marks it stale and changes nothing. An evicted
 * subscription keeps its data in the cold tier; so does a snapshot until a live sync replaces it.
 */
class ApiResolver implements KubeResolver {
  readonly #o: KubeResolverOptions;
  readonly #log: Logger;
  readonly #reflector: NewReflector;
  readonly #known = new Map<string, Known>();
  readonly #absent = new Set<string>();
  readonly #cold: LRUCache<string, Known>;
  readonly #subs: LRUCache<string, Subscription>;
  readonly #serviceSets = new Map<string, { set: ServiceSet; reflector: Reflector }>();
  readonly #slices = new Map<string, NamespaceSlices>();
  readonly #ips = new Map<string, ServiceKey>();
  readonly #snapshotIPs = new Map<string, ServiceKey>();
  readonly #waiters = new Map<string, Set<() => void>>();
  readonly #writer: SnapshotWriter | undefined;
  readonly #checks: ExistenceChecks;
  /** The mesh routes the snapshot held, until keepInSnapshot() hands them over. */
  #loadedRoutes: string[] = [];
  #part: SnapshotPart | undefined;
  #ready = false;
  #closing = false;

  constructor(o: KubeResolverOptions, snapshot: SnapshotData | undefined) {
    this.#o = o;
    this.#log = o.logger.child({ component: 'discovery' });
    this.#reflector = reflectorsOf({ ...o, logger: this.#log });
    this.#cold = new LRUCache<string, Known>({
      maxSize: o.coldBytes ?? 8 * 1024 * 1024,
      sizeCalculation: (k) => estimateBytes(k.info),
    });
    this.#subs = new LRUCache<string, Subscription>({
      max: o.maxWatches,
      dispose: (sub, _key, reason) => this.#unsubscribe(sub, reason),
    });
    this.#checks = new ExistenceChecks({
      api: o.api,
      clock: o.clock,
      logger: this.#log,
      ...(o.absentMs !== undefined ? { absentMs: o.absentMs } : {}),
      ...(o.reflector?.listTimeoutMs !== undefined ? { timeoutMs: o.reflector.listTimeoutMs } : {}),
    });
    this.#writer = snapshotWriterOf(o, this.#log, () => this.#collect());
    if (snapshot) this.#load(snapshot);
  }

  start(): void {
    if (this.#o.serviceScope === 'cluster') this.#serviceSet(undefined);
    else if (this.#o.homeNamespace) this.#serviceSet(this.#o.homeNamespace);
  }

  #load(s: SnapshotData): void {
    const now = this.#o.clock.now();
    for (const { info, syncedAt } of s.services) {
      const k: Known = { info, source: 'snapshot', stale: { since: now, reason: 'loaded from snapshot' } };
      if (syncedAt !== undefined) k.syncedAt = syncedAt;
      this.#cold.set(keyString(info.key), k);
    }
    for (const e of s.index) for (const ip of e.clusterIPs) this.#snapshotIPs.set(ip, e.key);
    this.#loadedRoutes = s.meshRoutes ?? [];
    this.#ready = true;
    this.#log.info('snapshot loaded; serving it as stale until the API confirms it', {
      services: s.services.length,
      indexed: s.index.length,
      ageMs: now - s.writtenAt,
    });
  }

  // ---- Service sets (one per scope) ----

  #scopeOf(ns: string): string | undefined {
    return this.#o.serviceScope === 'cluster' ? undefined : ns;
  }

  #serviceSet(scope: string | undefined): ServiceSet {
    const id = scope ?? '';
    const have = this.#serviceSets.get(id);
    if (have) return have.set;
    const set = new ServiceSet(
      (keys) => this.#servicesChanged(scope, keys),
      () => this.#healthChanged(scope),
    );
    const reflector = this.#reflector(`services ${scope ?? '(all namespaces)'}`, SERVICES(scope), {}, set);
    this.#serviceSets.set(id, { set, reflector });
    reflector.start();
    return set;
  }

  #servicesChanged(scope: string | undefined, keys: Iterable<string>): void {
    this.#ready = true;
    if (scope === undefined) this.#rebuildIPs();
    for (const k of keys) {
      if (this.#subs.has(k)) this.#recompute(k);
      else if (this.#o.serviceScope === 'cluster') this.#wake(k);
    }
  }

  #healthChanged(scope: string | undefined): void {
    for (const sub of this.#subs.values()) if (this.#scopeOf(sub.ns) === scope) this.#recompute(sub.key);
  }

  #rebuildIPs(): void {
    const set = this.#serviceSets.get('')?.set;
    if (!set) return;
    this.#ips.clear();
    for (const s of set.services.values()) {
      const key = { namespace: s.metadata.namespace, name: s.metadata.name };
      for (const ip of s.spec.clusterIPs ?? (s.spec.clusterIP ? [s.spec.clusterIP] : []))
        if (ip && ip !== 'None') this.#ips.set(ip, key);
    }
  }

  // ---- Subscriptions ----

  #subscribe(key: string, svcKey: ServiceKey): void {
    if (this.#closing || this.#subs.get(key)) return;
    const cold = this.#cold.get(key);
    if (cold) {
      this.#cold.delete(key);
      this.#known.set(key, cold);
    }
    this.#subs.set(key, { key, ns: svcKey.namespace, name: svcKey.name });
    this.#keepWithinBudget();
    this.#serviceSet(this.#scopeOf(svcKey.namespace));
    this.#slicesOf(svcKey.namespace).add(svcKey.name);
  }

  /** The one EndpointSlice watch of a namespace, shared by its subscriptions. */
  #slicesOf(ns: string): NamespaceSlices {
    const have = this.#slices.get(ns);
    if (have) return have;
    const group = new NamespaceSlices({
      clock: this.#o.clock,
      batchMs: this.#o.sliceBatchMs ?? 0,
      reflector: (selectors, sink) => this.#reflector(`endpointslices ${ns}`, SLICES(ns), selectors, sink),
      onChange: (names) => {
        for (const n of names) this.#recompute(`${ns}/${n}`);
      },
    });
    this.#slices.set(ns, group);
    return group;
  }

  /**
   * --max-watches bounds what subscriptions cost the API server: their slice watches plus the
   * Service watches only they need (other namespaces, in 'namespace' scope). The newest one stays
   * even if it alone needs two.
   */
  #keepWithinBudget(): void {
    while (this.#subs.size > 1 && this.#subs.size + this.#extraNamespaces() > this.#o.maxWatches)
      this.#subs.pop();
  }

  #extraNamespaces(): number {
    if (this.#o.serviceScope === 'cluster') return 0;
    const namespaces = new Set<string>();
    for (const s of this.#subs.values()) if (s.ns !== this.#o.homeNamespace) namespaces.add(s.ns);
    return namespaces.size;
  }

  /** A namespace's Service watch ends with its last subscription (not the home namespace's). */
  #closeIdleNamespace(ns: string): void {
    if (this.#o.serviceScope === 'cluster' || ns === this.#o.homeNamespace || this.#closing) return;
    for (const s of this.#subs.values()) if (s.ns === ns) return;
    const have = this.#serviceSets.get(ns);
    if (!have) return;
    this.#serviceSets.delete(ns);
    void have.reflector.stop();
  }

  /** 'namespace' scope: a namespace without a Service watch, where a lookup must ask first. */
  #unwatched(ns: string): boolean {
    return this.#o.serviceScope === 'namespace' && !this.#serviceSets.has(ns);
  }

  #unsubscribe(sub: Subscription, reason: string): void {
    const group = this.#slices.get(sub.ns);
    group?.remove(sub.name);
    if (group && group.size === 0 && !this.#closing) {
      this.#slices.delete(sub.ns);
      void group.close();
    }
    const k = this.#known.get(sub.key);
    this.#known.delete(sub.key);
    this.#absent.delete(sub.key);
    // Deferred: a subscription to the same namespace may be the one being added right now.
    queueMicrotask(() => this.#closeIdleNamespace(sub.ns));
    if (!k || this.#closing) return;
    k.source = 'cold';
    if (!k.stale) k.stale = { since: this.#o.clock.now(), reason: 'not watched (evicted from the live LRU)' };
    this.#cold.set(sub.key, k);
    this.#log.debug('subscription closed; data moved to the cold tier', { service: sub.key, reason });
  }

  /** Recomputes one subscribed Service from complete data only; otherwise just updates freshness. */
  #recompute(key: string): void {
    const sub = this.#subs.peek(key);
    if (!sub) return;
    const set = this.#serviceSets.get(this.#scopeOf(sub.ns) ?? '')?.set;
    const slices = this.#slices.get(sub.ns);
    if (!set || !slices) return;
    const now = this.#o.clock.now();
    const failure = set.failure ?? slices.failure;
    const known = this.#known.get(key);
    if (!set.listed || !slices.listed(sub.name)) {
      if (known && failure) markStale(known, now, failure, this.#log);
      return;
    }
    const svc = set.services.get(key);
    if (!svc) {
      // Authoritative: a complete list or a DELETED event said so.
      if (known || !this.#absent.has(key)) this.#log.info('service does not exist', { service: key });
      this.#known.delete(key);
      this.#absent.add(key);
      // Outlives the namespace's Service watch, which closes with its last subscription.
      if (this.#o.serviceScope === 'namespace') this.#checks.rememberAbsent(key);
      this.#changed(key);
      // No slice watch for a Service that does not exist: the Service watch sees it if it is
      // created, and the next lookup subscribes again. Deferred: we are inside a reflector callback.
      queueMicrotask(() => {
        if (this.#subs.peek(key) === sub && !set.services.has(key)) this.#subs.delete(key);
      });
      return;
    }
    this.#absent.delete(key);
    const info = mergeService(svc, slices.slicesOf(sub.name));
    const k: Known = known ?? { info, source: 'api' };
    k.info = info;
    k.source = 'api';
    if (failure) markStale(k, now, failure, this.#log);
    else markFresh(k, now, this.#log);
    this.#known.set(key, k);
    this.#ready = true;
    this.#changed(key);
  }

  #changed(key: string): void {
    this.#writer?.schedule();
    this.#wake(key);
  }

  #wake(key: string): void {
    const ws = this.#waiters.get(key);
    if (!ws) return;
    this.#waiters.delete(key);
    for (const w of ws) w();
  }

  // ---- Resolver port ----

  async resolve(key: ServiceKey, opts?: { waitMs?: number }): Promise<Resolution> {
    const k = keyString(key);
    const waitMs = opts?.waitMs ?? this.#o.waitMs ?? 1_500;
    const now = this.peek(key);
    if (now.kind !== 'found' && !this.#subs.has(k)) {
      // A watched scope already knows what does not exist: no watch for junk names.
      if (now.kind === 'absent') return now;
      if (this.#unwatched(key.namespace)) {
        if (this.#checks.cached(k)) return now;
        this.#checkThenSubscribe(k, key);
        await this.#waitFor(k, waitMs);
        return this.peek(key);
      }
    }
    this.#subscribe(k, key);
    if (now.kind === 'found') return now;
    const again = this.peek(key);
    if (again.kind !== 'unknown') return again;
    await this.#waitFor(k, waitMs);
    return this.peek(key);
  }

  resolveNow(key: ServiceKey): Resolution | undefined {
    const now = this.peek(key);
    if (now.kind !== 'found') return undefined;
    this.#subscribe(keyString(key), key);
    return now;
  }

  /** Not awaited by the lookup: a late "it exists" still subscribes, for the next lookup. */
  #checkThenSubscribe(k: string, key: ServiceKey): void {
    void this.#checks.check(key).then((exists) => {
      if (exists) this.#subscribe(k, key);
      else this.#wake(k);
    });
  }

  #waitFor(key: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const ws = this.#waiters.get(key) ?? new Set<() => void>();
      this.#waiters.set(key, ws);
      const done = (): void => {
        timer.cancel();
        ws.delete(done);
        resolve();
      };
      const timer = this.#o.clock.setTimer(ms, done);
      ws.add(done);
    });
  }

  peek(key: ServiceKey): Resolution {
    const k = keyString(key);
    const hot = this.#known.get(k) ?? this.#cold.get(k);
    if (hot) return found(hot);
    if (this.#absent.has(k)) return { kind: 'absent' };
    const set = this.#serviceSets.get(this.#scopeOf(key.namespace) ?? '')?.set;
    if (set?.listed) {
      if (!set.services.has(k)) return { kind: 'absent' };
    } else {
      const negative = set ? undefined : this.#checks.cached(k);
      if (negative) return negative;
    }
    return {
      kind: 'unknown',
      reason: this.#ready ? 'no data yet for this Service' : 'discovery has not synced yet',
    };
  }

  byClusterIP(ip: string): ServiceKey | undefined {
    const set = this.#serviceSets.get('')?.set;
    if (set?.listed) return this.#ips.get(ip);
    const fromSnapshot = this.#snapshotIPs.get(ip);
    if (fromSnapshot) return fromSnapshot;
    for (const k of this.#known.values()) if (k.info.clusterIPs.includes(ip)) return k.info.key;
    return undefined;
  }

  ready(): boolean {
    return this.#ready;
  }

  status(): DiscoveryStatus {
    let watches = 0;
    for (const g of this.#slices.values()) if (g.watching) watches++;
    for (const s of this.#serviceSets.values()) if (s.reflector.watching) watches++;
    const st = this.#o.transportStats?.();
    const exp = this.#o.tokenExpiresAt?.();
    return {
      ...statusOf([...this.#known.values(), ...this.#cold.values()], {
        ready: this.#ready,
        subscriptions: this.#subs.size,
        watches,
      }),
      counters: {
        apiLists: st?.lists ?? 0,
        apiWatches: st?.watches ?? 0,
        apiFailures: st?.failures ?? 0,
        unauthorizedRetries: st?.unauthorizedRetries ?? 0,
        coldServices: this.#cold.size,
        coldBytes: this.#cold.calculatedSize,
        indexedServices: this.#serviceSets.get('')?.set.services.size ?? 0,
        snapshotWrites: this.#writer?.writes ?? 0,
        ...(exp !== undefined ? { tokenExpiresAtMs: exp } : {}),
      },
    };
  }

  #collect(): SnapshotData {
    const services: SnapshotData['services'] = [];
    for (const k of [...this.#known.values(), ...this.#cold.values()])
      services.push(k.syncedAt !== undefined ? { info: k.info, syncedAt: k.syncedAt } : { info: k.info });
    const set = this.#serviceSets.get('')?.set;
    const index: SnapshotData['index'] = [];
    if (set?.listed) {
      for (const s of set.services.values()) {
        const ips = (s.spec.clusterIPs ?? (s.spec.clusterIP ? [s.spec.clusterIP] : [])).filter(
          (ip) => ip && ip !== 'None',
        );
        if (ips.length > 0)
          index.push({ key: { namespace: s.metadata.namespace, name: s.metadata.name }, clusterIPs: ips });
      }
    } else {
      const byKey = new Map<string, SnapshotData['index'][number]>();
      for (const [ip, key] of this.#snapshotIPs) {
        const e = byKey.get(keyString(key)) ?? { key, clusterIPs: [] };
        e.clusterIPs.push(ip);
        byKey.set(keyString(key), e);
      }
      index.push(...byKey.values());
    }
    return {
      writtenAt: this.#o.clock.now(),
      services,
      index,
      ...(this.#part ? { meshRoutes: this.#part.collect() } : {}),
    };
  }

  flushSnapshot(): Promise<void> {
    return this.#writer?.flush() ?? Promise.resolve();
  }

  keepInSnapshot(part: SnapshotPart): { changed(): void } {
    this.#part = part;
    if (this.#loadedRoutes.length > 0) part.load(this.#loadedRoutes);
    this.#loadedRoutes = [];
    return { changed: () => this.#writer?.schedule() };
  }

  async close(): Promise<void> {
    this.#closing = true;
    this.#checks.close();
    await Promise.all([
      ...[...this.#slices.values()].map((g) => g.close()),
      ...[...this.#serviceSets.values()].map((s) => s.reflector.stop()),
    ]);
    // The last state goes to disk before the subscriptions are dropped.
    await this.#writer?.close(true);
    this.#subs.clear();
    for (const key of [...this.#waiters.keys()]) this.#wake(key);
  }
}
