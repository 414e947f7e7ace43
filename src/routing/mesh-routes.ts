import { ObjectSet, type SetChange } from '../discovery/object-set.ts';
import type { Reflector } from '../discovery/reflector.ts';
import type { NewReflector } from '../discovery/reflectors.ts';
import { MeshRouteTable, type RejectedRoute } from '../routes/mesh.ts';
import {
  routeKey,
  slimGRPCRoute,
  slimHTTPRoute,
  type GRPCRoute,
  type HTTPRoute,
  type RouteMeta,
} from '../routes/objects.ts';

const GROUP = '/apis/gateway.networking.k8s.io/v1';

const keyedEntry = <T extends { metadata: RouteMeta }>(v: T): [string, T] => [routeKey(v.metadata), v];

/** An ObjectSet's slim(): the slimmed object under its "namespace/name". */
const keyed =
  <T extends { metadata: RouteMeta }>(slim: (raw: unknown) => T) =>
  (raw: unknown): { key: string; value: T } => {
    const [key, value] = keyedEntry(slim(raw));
    return { key, value };
  };

/** What /debug/routes and the readiness detail show of the sidecar's routes. */
export interface MeshRoutesStatus {
  /** Both collections listed once. */
  listed: boolean;
  httpRoutes: number;
  grpcRoutes: number;
  /** Services that some route names as its parent. */
  services: number;
  /** Routes naming a Service that are not applied (an unsupported match or filter), and why. */
  rejected: readonly RejectedRoute[];
  stale: { collection: string; reason: string; since: number }[];
}

/**
 * The HTTPRoutes and GRPCRoutes that a sidecar applies to its app's calls: GAMMA routes, whose parentRef is a
 * Service (their backendRefs in other namespaces need no ReferenceGrant: routes/mesh.ts). Read from every namespace,
 * since a call's producer routes live in the Service's namespace and its consumer routes in the
 * caller's. Under the last-known-good rules of every collection read from the API (ObjectSet): a
 * failed or partial read removes no route; the table is rebuilt aside and swapped whole on a change
 * of data, never on a status write's echo. Each kind is its own collection: a cluster without one
 * CRD (or a sidecar not allowed to list it) has the other's routes applied, and retries the
 * missing one with backoff.
 */
export class MeshRoutes {
  readonly #routes: ObjectSet<HTTPRoute>;
  readonly #grpcRoutes: ObjectSet<GRPCRoute>;
  readonly #reflectors: Reflector[];
  readonly #onTable: (table: MeshRouteTable) => void;
  #table = new MeshRouteTable({ routes: [] });

  /** onTable hears every new table (discovery subscribes its backends ahead of the first call). */
  constructor(reflector: NewReflector, now: () => number, onTable: (table: MeshRouteTable) => void) {
    this.#onTable = onTable;
    const changed = (change: SetChange): void => {
      if (change === 'data') this.#rebuild();
    };
    this.#routes = new ObjectSet(keyed(slimHTTPRoute), changed, now);
    this.#grpcRoutes = new ObjectSet(keyed(slimGRPCRoute), changed, now);
    this.#reflectors = [
      reflector('httproutes', `${GROUP}/httproutes`, {}, this.#routes),
      reflector('grpcroutes', `${GROUP}/grpcroutes`, {}, this.#grpcRoutes),
    ];
  }

  start(): void {
    for (const r of this.#reflectors) r.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.#reflectors.map((r) => r.stop()));
  }

  table(): MeshRouteTable {
    return this.#table;
  }

  status(): MeshRoutesStatus {
    const sets = [
      ['httproutes', this.#routes],
      ['grpcroutes', this.#grpcRoutes],
    ] as const;
    return {
      listed: sets.every(([, set]) => set.listed),
      httpRoutes: this.#routes.items.size,
      grpcRoutes: this.#grpcRoutes.items.size,
      services: this.#table.services(),
      rejected: this.#table.rejected(),
      stale: sets.flatMap(([collection, set]) => (set.failure ? [{ collection, ...set.failure }] : [])),
    };
  }

  /** The objects as JSON text, for the snapshot. */
  collect(): string[] {
    return [...this.#routes.items.values(), ...this.#grpcRoutes.items.values()].map((v) => JSON.stringify(v));
  }

  /**
   * Objects from a snapshot, stale until a complete list confirms them; undecodable ones skipped,
   * and so are the ReferenceGrants that snapshots of earlier versions hold.
   */
  load(texts: readonly string[]): void {
    const routes: [string, HTTPRoute][] = [];
    const grpcRoutes: [string, GRPCRoute][] = [];
    for (const t of texts) {
      const raw = JSON.parse(t) as { kind?: unknown } | null;
      if (raw?.kind === 'HTTPRoute') routes.push(keyedEntry(slimHTTPRoute(raw)));
      if (raw?.kind === 'GRPCRoute') grpcRoutes.push(keyedEntry(slimGRPCRoute(raw)));
    }
    // An empty collection in the file is as much last-known-good as a full one.
    this.#routes.load(routes);
    this.#grpcRoutes.load(grpcRoutes);
    this.#rebuild();
  }

  #rebuild(): void {
    this.#table = new MeshRouteTable({
      routes: this.#routes.items.values(),
      grpcRoutes: this.#grpcRoutes.items.values(),
    });
    this.#onTable(this.#table);
  }
}
