import { ObjectSet, type SetChange } from '../discovery/object-set.ts';
import type { Reflector } from '../discovery/reflector.ts';
import type { NewReflector } from '../discovery/reflectors.ts';
import { MeshRouteTable } from '../routes/mesh.ts';
import {
  routeKey,
  slimHTTPRoute,
  slimReferenceGrant,
  type HTTPRoute,
  type ReferenceGrant,
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
  referenceGrants: number;
  /** Services that some route names as its parent. */
  services: number;
  stale: { collection: string; reason: string; since: number }[];
}

/**
 * The HTTPRoutes (and the ReferenceGrants their cross-namespace backendRefs need) that a sidecar
 * applies to its app's calls: GAMMA routes, whose parentRef is a Service. Read from every namespace,
 * since a call's producer routes live in the Service's namespace and its consumer routes in the
 * caller's. Under the last-known-good rules of every collection read from the API (ObjectSet): a
 * failed or partial read removes no route; the table is rebuilt aside and swapped whole on a change
 * of data, never on a status write's echo.
 */
export class MeshRoutes {
  readonly #routes: ObjectSet<HTTPRoute>;
  readonly #grants: ObjectSet<ReferenceGrant>;
  readonly #reflectors: Reflector[];
  readonly #onTable: (table: MeshRouteTable) => void;
  #table = new MeshRouteTable({ routes: [], grants: [] });

  /** onTable hears every new table (discovery subscribes its backends ahead of the first call). */
  constructor(reflector: NewReflector, now: () => number, onTable: (table: MeshRouteTable) => void) {
    this.#onTable = onTable;
    const changed = (change: SetChange): void => {
      if (change === 'data') this.#rebuild();
    };
    this.#routes = new ObjectSet(keyed(slimHTTPRoute), changed, now);
    this.#grants = new ObjectSet(keyed(slimReferenceGrant), changed, now);
    this.#reflectors = [
      reflector('httproutes', `${GROUP}/httproutes`, {}, this.#routes),
      reflector('referencegrants', `${GROUP}/referencegrants`, {}, this.#grants),
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
    const sets = { httproutes: this.#routes, referencegrants: this.#grants };
    return {
      listed: this.#routes.listed && this.#grants.listed,
      httpRoutes: this.#routes.items.size,
      referenceGrants: this.#grants.items.size,
      services: this.#table.services(),
      stale: Object.entries(sets).flatMap(([collection, s]) =>
        s.failure ? [{ collection, ...s.failure }] : [],
      ),
    };
  }

  /** The objects as JSON text, for the snapshot. */
  collect(): string[] {
    return [...this.#routes.items.values(), ...this.#grants.items.values()].map((v) => JSON.stringify(v));
  }

  /** Objects from a snapshot, stale until a complete list confirms them; undecodable ones skipped. */
  load(texts: readonly string[]): void {
    const routes: [string, HTTPRoute][] = [];
    const grants: [string, ReferenceGrant][] = [];
    for (const t of texts) {
      const raw = JSON.parse(t) as { kind?: unknown } | null;
      if (raw?.kind === 'HTTPRoute') routes.push(keyedEntry(slimHTTPRoute(raw)));
      else if (raw?.kind === 'ReferenceGrant') grants.push(keyedEntry(slimReferenceGrant(raw)));
    }
    // An empty collection in the file is as much last-known-good as a full one.
    this.#routes.load(routes);
    this.#grants.load(grants);
    this.#rebuild();
  }

  #rebuild(): void {
    this.#table = new MeshRouteTable({
      routes: this.#routes.items.values(),
      grants: this.#grants.items.values(),
    });
    this.#onTable(this.#table);
  }
}
