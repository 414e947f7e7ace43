import { setImmediate as tick } from 'node:timers/promises';
import { KubeError, type KubeApi, type ListResult, type WatchEvent } from '../../src/kube/api.ts';

type Obj = {
  metadata: { name: string; namespace: string; resourceVersion?: string; labels?: Record<string, string> };
};

export type Fault = Error | 'stall' | undefined;

interface Watcher {
  path: string;
  query: Record<string, string>;
  push(e: WatchEvent): void;
  end(err?: Error): void;
}

/**
 * An in-memory API server for unit tests of the reflector and the resolver: collections by path,
 * label/field selectors, a global resourceVersion, watches that replay nothing (tests start them
 * from a list), and injectable faults per request ('stall' never answers until aborted).
 */
export class FakeKubeApi implements KubeApi {
  #rv = 100;
  readonly collections = new Map<string, Map<string, Obj>>();
  readonly watchers = new Set<Watcher>();
  readonly calls: { op: 'list' | 'watch'; path: string; query: Record<string, string> }[] = [];
  /** Decides a fault per request; undefined lets it through. */
  fault: (op: 'list' | 'watch', path: string, query: Record<string, string>) => Fault = () => undefined;

  put(path: string, obj: Obj): void {
    const col = this.collections.get(path) ?? new Map<string, Obj>();
    this.collections.set(path, col);
    const type = col.has(obj.metadata.name) ? 'MODIFIED' : 'ADDED';
    const stored = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(++this.#rv) } };
    col.set(obj.metadata.name, stored);
    this.#emit(path, { type, object: stored });
  }

  readonly patches: { path: string; patch: unknown }[] = [];

  /**
   * A merge patch of a status subresource (`.../<resource>/<name>/status`, namespaced or not):
   * recorded, and applied to the stored object's status field by field, as a watch event.
   */
  mergePatch(path: string, patch: unknown): Promise<void> {
    this.patches.push({ path, patch });
    const m = /^(.*?)(?:\/namespaces\/([^/]+))?\/([^/]+)\/([^/]+)\/status$/.exec(path);
    const col = m && this.collections.get(`${m[1]}/${m[3]}`);
    const obj = col?.get(decodeURIComponent(m![4]!));
    if (!m || !col || !obj)
      return Promise.reject(new KubeError('kube_unavailable', `not found: ${path}`, 404));
    const status = {
      ...((obj as { status?: object }).status ?? {}),
      ...(patch as { status: object }).status,
    };
    this.put(`${m[1]}/${m[3]}`, { ...obj, status } as Obj);
    return Promise.resolve();
  }

  readonly applied: { path: string; object: unknown; fieldManager: string }[] = [];
  /** Server-side applies fail with this while set. */
  applyFault: Error | undefined;

  /**
   * A server-side apply (the gateway's Services): recorded, and answered with the object and a
   * ClusterIP of its own per path, as the API assigns one on create and keeps it after.
   */
  apply(path: string, object: unknown, fieldManager: string): Promise<unknown> {
    if (this.applyFault) return Promise.reject(this.applyFault);
    this.applied.push({ path, object, fieldManager });
    const paths = [...new Set(this.applied.map((a) => a.path))];
    const o = object as { spec?: object };
    return Promise.resolve({ ...o, spec: { ...o.spec, clusterIP: `10.96.1.${paths.indexOf(path) + 1}` } });
  }

  remove(path: string, name: string): void {
    const col = this.collections.get(path);
    const obj = col?.get(name);
    if (!col || !obj) return;
    col.delete(name);
    this.#emit(path, {
      type: 'DELETED',
      object: { ...obj, metadata: { ...obj.metadata, resourceVersion: String(++this.#rv) } },
    });
  }

  /** Ends every open watch (matching path, if given) with an error or cleanly. */
  breakWatches(err?: Error, path?: string): void {
    for (const w of [...this.watchers]) if (!path || w.path === path) w.end(err);
  }

  /** Sends an in-stream ERROR event with this status code (410: resource version too old). */
  sendError(code: number, path?: string): void {
    for (const w of [...this.watchers])
      if (!path || w.path === path)
        w.push({ type: 'ERROR', object: { kind: 'Status', code, message: `code ${code}` } });
  }

  bookmark(): void {
    for (const w of this.watchers)
      w.push({ type: 'BOOKMARK', object: { metadata: { resourceVersion: String(this.#rv) } } });
  }

  openWatches(pathPrefix = ''): number {
    return [...this.watchers].filter((w) => w.path.startsWith(pathPrefix)).length;
  }

  async list(path: string, query: Record<string, string>, signal: AbortSignal): Promise<ListResult> {
    this.calls.push({ op: 'list', path, query });
    await this.#faultFor('list', path, query, signal);
    const items = this.#matching(path, query);
    return { items, resourceVersion: String(this.#rv) };
  }

  async watch(
    path: string,
    query: Record<string, string>,
    handlers: { onOpen(): void; onEvent(e: WatchEvent): void },
    signal: AbortSignal,
  ): Promise<void> {
    this.calls.push({ op: 'watch', path, query });
    await this.#faultFor('watch', path, query, signal);
    return new Promise<void>((resolve, reject) => {
      const w: Watcher = {
        path,
        query,
        push: (e) => {
          try {
            handlers.onEvent(e);
          } catch (err) {
            w.end(err as Error);
          }
        },
        end: (err) => {
          this.watchers.delete(w);
          signal.removeEventListener('abort', onAbort);
          if (err) reject(err);
          else resolve();
        },
      };
      const onAbort = (): void => w.end(signal.reason as Error);
      signal.addEventListener('abort', onAbort, { once: true });
      this.watchers.add(w);
      handlers.onOpen();
    });
  }

  #matching(path: string, query: Record<string, string>): Obj[] {
    return [...(this.collections.get(path)?.values() ?? [])].filter((o) => matches(o, query));
  }

  #emit(path: string, e: WatchEvent): void {
    for (const w of [...this.watchers]) if (w.path === path && matches(e.object as Obj, w.query)) w.push(e);
  }

  async #faultFor(
    op: 'list' | 'watch',
    path: string,
    query: Record<string, string>,
    signal: AbortSignal,
  ): Promise<void> {
    await tick();
    const f = this.fault(op, path, query);
    if (f === 'stall') {
      await new Promise<never>((_, reject) => {
        if (signal.aborted) reject(signal.reason as Error);
        signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
      });
    }
    if (f instanceof Error) throw f;
    if (signal.aborted) throw signal.reason as Error;
  }
}

function matches(o: Obj, query: Record<string, string>): boolean {
  const set = /^([^ ]+) in \(([^)]*)\)$/.exec(query.labelSelector ?? '');
  if (set && !set[2]?.split(',').includes(o.metadata.labels?.[set[1] ?? ''] ?? '\0')) return false;
  const label = set ? undefined : query.labelSelector?.split('=');
  if (label && label.length === 2 && o.metadata.labels?.[label[0] ?? ''] !== label[1]) return false;
  const field = query.fieldSelector?.split('=');
  if (field && field[0] === 'metadata.name' && o.metadata.name !== field[1]) return false;
  return true;
}

export const unavailable = (msg = 'connect ECONNREFUSED'): KubeError =>
  new KubeError('kube_unavailable', msg);
export const gone = (): KubeError => new KubeError('kube_gone', 'too old resource version', 410);
export const status = (code: number): KubeError =>
  new KubeError(
    code === 401 ? 'kube_unauthorized' : code === 403 ? 'kube_forbidden' : 'kube_unavailable',
    `HTTP ${code}`,
    code,
  );
