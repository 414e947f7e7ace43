import { ObjectSet, type SetChange } from '../discovery/object-set.ts';
import type { Reflector } from '../discovery/reflector.ts';
import type { NewReflector } from '../discovery/reflectors.ts';
import { MeshRouteTable } from '../routes/mesh.ts';
import { routeKey, slimHTTPRoute, type HTTPRoute, type RouteMeta } from '../routes/objects.ts';

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
  /** The collection listed once. */
  listed: boolean;
  httpRoutes: number;
  /** Services that some route names as its parent. */
  services: number;
  stale: { collection: string; reason: string; since: number }[];
}

/**
 * The HTTPRoutes that a sidecar applies to its app's calls: GAMMA routes, whose parentRef is a
 * Service (their backendRefs in other namespaces need no ReferenceGrant: routes/mesh.ts). Read from every namespace,
 * since a call's producer routes live in the Service's namespace and its consumer routes in the
 * caller's. Under the last-known-good rules of every collection read from the API (ObjectSet): a
 * failed or partial read removes no route; the table is rebuilt aside and swapped whole on a change
 * of data, never on a status write's echo.
 */
export class MeshRoutes {
  readonly #routes: ObjectSet<HTTPRoute>;
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
    this.#reflectors = [reflector('httproutes', `${GROUP}/httproutes`, {}, this.#routes)];
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
    const failure = this.#routes.failure;
    return {
      listed: this.#routes.listed,
      httpRoutes: this.#routes.items.size,
      services: this.#table.services(),
      stale: failure ? [{ collection: 'httproutes', ...failure }] : [],
    };
  }

  /** The objects as JSON text, for the snapshot. */
  collect(): string[] {
    return [...this.#routes.items.values()].map((v) => JSON.stringify(v));
  }

  /**
   * Objects from a snapshot, stale until a complete list confirms them; undecodable ones skipped,
   * and so are the ReferenceGrants that snapshots of earlier versions hold.
   */
  load(texts: readonly string[]): void {
    const routes: [string, HTTPRoute][] = [];
    for (const t of texts) {
      const raw = JSON.parse(t) as { kind?: unknown } | null;
      if (raw?.kind === 'HTTPRoute') routes.push(keyedEntry(slimHTTPRoute(raw)));
    }
    // An empty collection in the file is as much last-known-good as a full one.
    this.#routes.load(routes);
    this.#rebuild();
  }

  #rebuild(): void {
    this.#table = new MeshRouteTable({ routes: this.#routes.items.values() });
    this.#onTable(this.#table);
  }
}
