import type { KubeApi } from '../kube/api.ts';
import type { Reflector } from '../discovery/reflector.ts';
import { reflectorsOf, type NewReflector, type ReflectorTuning } from '../discovery/reflectors.ts';
import {
  readSnapshot,
  snapshotWriterOf,
  type GatewaySnapshot,
  type SnapshotData,
  type SnapshotWriter,
} from '../discovery/snapshot.ts';
import type { Clock, Random } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import { selectIngresses, type ClassPolicy } from './classes.ts';
import { ObjectSet, type SetChange } from '../discovery/object-set.ts';
import {
  ingressToApi,
  objectKey,
  slimIngress,
  slimIngressClass,
  slimTlsSecret,
  type Ingress,
  type IngressClass,
  type TlsSecret,
} from './objects.ts';
import { RouteTable, type TableProblem } from './table.ts';
import { GatewayRouteTable } from '../routes/table.ts';
import type { ReadStatus } from '../routes/objects.ts';
import { RouteObjects } from './route-objects.ts';

/**
 * What the gateway reads from the API, kept under the same last-known-good rules as the sidecar's
 * discovery (the same Reflector: never stops, relists after 410, never deletes on a failed or
 * partial read): every Ingress (of one namespace or all), every IngressClass, and exactly the TLS
 * Secrets the served Ingresses name (one watch each, `fieldSelector=metadata.name=`, so RBAC can
 * grant them by resourceNames). Every change rebuilds the route table aside and swaps it whole.
 *
 * With a snapshot path, the same data is persisted (debounced, atomic, 0600) and loaded before the
 * first list, so a gateway restarted during an API outage serves every route and certificate it
 * had; loaded data is stale until a complete list confirms it.
 */
export interface GatewayStoreOptions {
  api: KubeApi;
  clock: Clock;
  random: Random;
  logger: Logger;
  classPolicy: ClassPolicy;
  /** Watch Ingresses of this namespace only; all namespaces when unset. */
  namespace?: string;
  /** Also serve Gateway API Gateways, HTTPRoutes and GRPCRoutes (the CRDs must be installed). */
  gatewayApi?: boolean;
  /** "namespace/name" of the default certificate's Secret. */
  defaultCertificate?: string;
  snapshotPath?: string;
  snapshotDebounceMs?: number;
  reflector?: ReflectorTuning;
  /** Called with every new table (after the swap). */
  onTable?: (table: RouteTable, secrets: ReadonlyMap<string, TlsSecret>, routes: GatewayRouteTable) => void;
}

export interface GatewayStatus {
  ready: boolean;
  ingresses: number;
  ingressClasses: number;
  servedIngresses: number;
  routes: number;
  tlsSecrets: number;
  /** With --gateway-api: our Gateways, and the attachments of routes of each kind to their listeners. */
  gateways?: number;
  httpRoutes?: number;
  grpcRoutes?: number;
  stale: { collection: string; reason: string; since: number }[];
  /** How many of the problems are conflicts (a rule, default, certificate or host lost). */
  conflicts: number;
  problems: TableProblem[];
}

const INGRESSES = (ns: string | undefined): string =>
  ns === undefined
    ? '/apis/networking.k8s.io/v1/ingresses'
    : `/apis/networking.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/ingresses`;
const CLASSES = '/apis/networking.k8s.io/v1/ingressclasses';
const SECRETS = (ns: string): string => `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets`;

interface Watched<T extends object> {
  set: ObjectSet<T>;
  reflector: Reflector;
}

export async function createGatewayStore(o: GatewayStoreOptions): Promise<GatewayStore> {
  const snapshot = o.snapshotPath ? await readSnapshot(o.snapshotPath, o.logger) : undefined;
  const store = new GatewayStore(o, snapshot?.gateway);
  store.start();
  return store;
}

export class GatewayStore {
  readonly #o: GatewayStoreOptions;
  readonly #log: Logger;
  readonly #reflector: NewReflector;
  readonly #ingresses: Watched<Ingress>;
  readonly #classes: Watched<IngressClass>;
  readonly #secrets = new Map<string, Watched<TlsSecret>>();
  readonly #writer: SnapshotWriter | undefined;
  #table = new RouteTable([]);
  readonly #routeObjects: RouteObjects | undefined;
  #routeTable = EMPTY_ROUTES;
  #served: Ingress[] = [];
  #fromSnapshot = false;
  #stale = false;
  #rebuildQueued = false;
  /** The tables whose objects changed since the last rebuild; both at start. */
  readonly #dirty = new Set<'ingress' | 'routes'>(['ingress', 'routes']);
  #closed = false;

  constructor(o: GatewayStoreOptions, snapshot: GatewaySnapshot | undefined) {
    this.#o = o;
    this.#log = o.logger.child({ component: 'gateway-discovery' });
    this.#reflector = reflectorsOf({ ...o, logger: this.#log });
    const now = (): number => o.clock.now();
    const ingressChanged = (c: SetChange): void => this.#changed(c, 'ingress');
    this.#ingresses = this.#watch(
      'ingresses',
      INGRESSES(o.namespace),
      {},
      new ObjectSet((raw) => keyed(slimIngress(raw)), ingressChanged, now),
    );
    this.#classes = this.#watch(
      'ingressclasses',
      CLASSES,
      {},
      new ObjectSet((raw) => keyed(slimIngressClass(raw)), ingressChanged, now),
    );
    if (o.gatewayApi)
      this.#routeObjects = new RouteObjects(
        this.#reflector,
        o.namespace,
        (c) => this.#changed(c, 'routes'),
        now,
      );
    this.#writer = snapshotWriterOf(o, this.#log, () => this.#collect());
    const routes = o.gatewayApi ? (snapshot?.gatewayApi.length ?? 0) : 0;
    if (snapshot && snapshot.ingresses.length + snapshot.ingressClasses.length + routes > 0)
      this.#load(snapshot);
  }

  start(): void {
    this.#ingresses.reflector.start();
    this.#classes.reflector.start();
    this.#routeObjects?.start();
    this.#rebuild();
  }

  /** The current table: swapped whole, so a request sees one table from start to end. */
  table(): RouteTable {
    return this.#table;
  }

  /**
   * The Ingresses of our class of which the current table serves something: an Ingress whose
   * every host belongs to another namespace is not among them (its status gets no address).
   */
  served(): Ingress[] {
    // As last read: a status write's echo rebuilds no table, and its writer compares with it.
    return this.#served.map((ing) => this.#ingresses.set.items.get(objectKey(ing.metadata)) ?? ing);
  }

  /** A Gateway API object's status as last read. */
  routeStatusOf(...a: Parameters<RouteObjects['statusOf']>): ReadStatus | undefined {
    return this.#routeObjects?.statusOf(...a);
  }

  /** The current Gateway API table (empty without --gateway-api). */
  routeTable(): GatewayRouteTable {
    return this.#routeTable;
  }

  /** One TLS Secret ("namespace/name") as last read, if it is watched and read. */
  secret(key: string): TlsSecret | undefined {
    return this.#secrets.get(key)?.set.items.get(key);
  }

  secrets(): Map<string, TlsSecret> {
    const out = new Map<string, TlsSecret>();
    for (const key of this.#secrets.keys()) {
      const s = this.secret(key);
      if (s) out.set(key, s);
    }
    return out;
  }

  /** Ready to route: both Ingresses and IngressClasses listed once, or a snapshot loaded. */
  ready(): boolean {
    return this.#fromSnapshot || this.#allListed();
  }

  #allListed(): boolean {
    return this.#ingresses.set.listed && this.#classes.set.listed && (this.#routeObjects?.listed() ?? true);
  }

  /**
   * Stale when any collection the table depends on is failing or not yet confirmed. Read per
   * request, so it is computed when the collections change (a failure or a recovery is a change).
   */
  stale(): boolean {
    return this.#stale;
  }

  #computeStale(): boolean {
    if (this.#ingresses.set.failure || this.#classes.set.failure) return true;
    if ((this.#routeObjects?.failures().length ?? 0) > 0) return true;
    for (const w of this.#secrets.values()) if (w.set.failure) return true;
    return false;
  }

  status(): GatewayStatus {
    const stale: GatewayStatus['stale'] = [];
    const add = (collection: string, set: ObjectSet<object>): void => {
      if (set.failure) stale.push({ collection, ...set.failure });
    };
    add('ingresses', this.#ingresses.set);
    add('ingressclasses', this.#classes.set);
    for (const [key, w] of this.#secrets) add(`secret ${key}`, w.set);
    stale.push(...(this.#routeObjects?.failures() ?? []));
    return {
      ready: this.ready(),
      ingresses: this.#ingresses.set.items.size,
      ingressClasses: this.#classes.set.items.size,
      servedIngresses: this.#table.ingresses,
      routes: this.#table.routes,
      tlsSecrets: this.secrets().size,
      ...(this.#routeObjects
        ? {
            gateways: this.#routeTable.gateways().size,
            httpRoutes: this.#routeTable.attachedRoutes('HTTPRoute'),
            grpcRoutes: this.#routeTable.attachedRoutes('GRPCRoute'),
          }
        : {}),
      stale,
      conflicts: this.#table.conflicts().length,
      problems: this.#table.problems,
    };
  }

  flushSnapshot(): Promise<void> {
    return this.#writer?.flush() ?? Promise.resolve();
  }

  async close(): Promise<void> {
    this.#closed = true;
    const all = [this.#ingresses, this.#classes, ...this.#secrets.values()];
    await Promise.all([...all.map((w) => w.reflector.stop()), this.#routeObjects?.stop()]);
    await this.#writer?.close(true);
  }

  #load(s: GatewaySnapshot): void {
    const parse = <T>(
      texts: string[],
      slim: (raw: unknown) => T & { metadata: { namespace: string; name: string } },
    ) =>
      texts.map((t): [string, T] => {
        const v = slim(JSON.parse(t));
        return [objectKey(v.metadata), v];
      });
    try {
      this.#ingresses.set.load(parse(s.ingresses, slimIngress));
      this.#classes.set.load(parse(s.ingressClasses, slimIngressClass));
      this.#routeObjects?.load(s.gatewayApi);
    } catch (e) {
      this.#log.warn('gateway snapshot ignored', { reason: (e as Error).message });
      return;
    }
    for (const t of s.tlsSecrets) {
      const secret: TlsSecret = {
        kind: 'Secret',
        metadata: { namespace: t.namespace, name: t.name, resourceVersion: t.resourceVersion },
        type: 'kubernetes.io/tls',
        cert: t.certPem,
        key: t.keyPem,
      };
      this.#secretWatch(`${t.namespace}/${t.name}`, false).set.load([[`${t.namespace}/${t.name}`, secret]]);
    }
    this.#fromSnapshot = true;
    this.#log.info('gateway snapshot loaded; serving it as stale until the API confirms it', {
      ingresses: s.ingresses.length,
      ingressClasses: s.ingressClasses.length,
      tlsSecrets: s.tlsSecrets.length,
      gatewayApiObjects: this.#routeObjects ? s.gatewayApi.length : 0,
    });
  }

  #watch<T extends object>(
    name: string,
    path: string,
    selectors: Record<string, string>,
    set: ObjectSet<T>,
  ): Watched<T> {
    return { set, reflector: this.#reflector(name, path, selectors, set) };
  }

  #secretWatch(key: string, start: boolean): Watched<TlsSecret> {
    let w = this.#secrets.get(key);
    if (!w) {
      const [ns = '', name = ''] = key.split('/');
      w = this.#watch(
        `secret ${key}`,
        SECRETS(ns),
        { fieldSelector: `metadata.name=${name}` },
        new ObjectSet(
          (raw) => {
            const s = slimTlsSecret(raw, ns);
            const meta = (raw as { metadata?: { name?: string } } | null)?.metadata;
            return { key: `${ns}/${meta?.name ?? name}`, value: s };
          },
          (c) => this.#changed(c, undefined),
          () => this.#o.clock.now(),
        ),
      );
      this.#secrets.set(key, w);
    }
    if (start) w.reflector.start();
    return w;
  }

  /**
   * Coalesces a burst of events (a relist, a rollout) into one rebuild, of only the table whose
   * objects changed. A status-only change (the echo of a status write) rebuilds nothing: the
   * status writers read status from the collections, not from the tables.
   */
  #changed(change: SetChange, table: 'ingress' | 'routes' | undefined): void {
    if (change === 'status') {
      this.#writer?.schedule();
      return;
    }
    if (change === 'data' && table) this.#dirty.add(table);
    if (this.#rebuildQueued || this.#closed) return;
    this.#rebuildQueued = true;
    queueMicrotask(() => {
      this.#rebuildQueued = false;
      if (!this.#closed) this.#rebuild();
    });
  }

  #rebuild(): void {
    if (this.#dirty.has('ingress')) this.#rebuildIngressTable();
    if (this.#dirty.has('routes'))
      this.#routeTable = this.#routeObjects?.table(this.#o.classPolicy.controller) ?? EMPTY_ROUTES;
    this.#dirty.clear();
    this.#syncSecretWatches(this.#table);
    this.#stale = this.#computeStale();
    this.#o.onTable?.(this.#table, this.secrets(), this.#routeTable);
    this.#writer?.schedule();
  }

  #rebuildIngressTable(): void {
    const served = selectIngresses(
      this.#ingresses.set.items.values(),
      this.#classes.set.items.values(),
      this.#o.classPolicy,
    );
    const table = new RouteTable(served);
    this.#served = served.filter((ing) => table.serves(ing));
    const before = this.#table;
    this.#table = table;
    if (before.routes !== table.routes || before.ingresses !== table.ingresses)
      this.#log.info('route table rebuilt', { ingresses: table.ingresses, routes: table.routes });
    this.#logConflicts(before, table);
  }

  /**
   * One line per conflict that appears and one per conflict that goes: a table rebuilt from the
   * same Ingresses (a relist, a resync, a snapshot confirmed) has the same conflicts, so nothing.
   */
  #logConflicts(before: RouteTable, after: RouteTable): void {
    const keyed = (t: RouteTable): Map<string, TableProblem> =>
      new Map(t.conflicts().map((p) => [JSON.stringify([p.ingress, p.conflict]), p]));
    const was = keyed(before);
    const now = keyed(after);
    for (const [key, p] of now)
      if (!was.has(key))
        this.#log.warn('Ingress rule not served: conflict', {
          ingress: p.ingress,
          ...p.conflict,
          reason: p.message,
        });
    for (const [key, p] of was)
      if (!now.has(key)) this.#log.info('Ingress conflict resolved', { ingress: p.ingress, ...p.conflict });
  }

  /**
   * Watches exactly the Secrets the table names (plus the default certificate's). A Secret no
   * longer named is dropped: an Ingress change the API confirmed removed it, not an error.
   */
  #syncSecretWatches(table: RouteTable): void {
    const wanted = table.tlsSecrets();
    for (const key of this.#routeTable.tlsSecrets()) wanted.add(key);
    if (this.#o.defaultCertificate) wanted.add(this.#o.defaultCertificate);
    for (const key of wanted) this.#secretWatch(key, true);
    for (const [key, w] of this.#secrets) {
      if (wanted.has(key)) continue;
      // While the Ingresses themselves are not confirmed, keep what the snapshot had.
      if (!this.#allListed()) continue;
      this.#secrets.delete(key);
      void w.reflector.stop();
    }
  }

  #collect(): SnapshotData {
    const json = (xs: Iterable<unknown>): string[] => [...xs].map((x) => JSON.stringify(x));
    const tlsSecrets = [...this.secrets().values()].map((s) => ({
      namespace: s.metadata.namespace,
      name: s.metadata.name,
      resourceVersion: s.metadata.resourceVersion ?? '',
      certPem: s.cert,
      keyPem: s.key,
    }));
    return {
      writtenAt: this.#o.clock.now(),
      services: [],
      index: [],
      gateway: {
        ingresses: json([...this.#ingresses.set.items.values()].map(ingressToApi)),
        ingressClasses: json(this.#classes.set.items.values()),
        tlsSecrets,
        gatewayApi: this.#routeObjects?.collect() ?? [],
      },
    };
  }
}

const EMPTY_ROUTES = new GatewayRouteTable({
  controller: '',
  classes: [],
  gateways: [],
  routes: [],
  grants: [],
});

function keyed<T extends { metadata: { namespace: string; name: string } }>(v: T): { key: string; value: T } {
  return { key: objectKey(v.metadata), value: v };
}
