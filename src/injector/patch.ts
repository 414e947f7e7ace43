import type { PatchOp } from './types.ts';

/** RFC 6901: `~` and `/` inside a key are escaped. */
export const escapePointer = (key: string): string => key.replaceAll('~', '~0').replaceAll('/', '~1');
const unescapePointer = (token: string): string => token.replaceAll('~1', '/').replaceAll('~0', '~');

/**
 * Builds `add` operations against the object as it was received. Arrays are extended, never
 * replaced, so whatever another webhook added is kept (upstream webhook good practice).
 */
export class PatchBuilder {
  readonly ops: PatchOp[] = [];

  /** Inserts items at the start of an array (or creates it), keeping their order. */
  prepend(path: string, existing: unknown[] | undefined, items: unknown[]): void {
    if (items.length === 0) return;
    if (existing === undefined) this.ops.push({ op: 'add', path, value: items });
    else items.forEach((value, i) => this.ops.push({ op: 'add', path: `${path}/${i}`, value }));
  }

  /** Appends items to an array (or creates it). */
  append(path: string, existing: unknown[] | undefined, items: unknown[]): void {
    if (items.length === 0) return;
    if (existing === undefined) this.ops.push({ op: 'add', path, value: items });
    else for (const value of items) this.ops.push({ op: 'add', path: `${path}/-`, value });
  }

  /** Adds map entries (or creates the map). */
  addEntries(
    path: string,
    existing: Record<string, string> | undefined,
    entries: Record<string, string>,
  ): void {
    if (Object.keys(entries).length === 0) return;
    if (existing === undefined) this.ops.push({ op: 'add', path, value: entries });
    else
      for (const [k, v] of Object.entries(entries))
        this.ops.push({ op: 'add', path: `${path}/${escapePointer(k)}`, value: v });
  }
}

/**
 * Applies `add` operations to a deep copy of doc, for `outrigger inject -f` and for tests that
 * check what the API server will store. Anything else is a programming error here.
 */
export function applyPatch<T>(doc: T, ops: readonly PatchOp[]): T {
  const root = structuredClone(doc) as unknown;
  for (const { op, path, value } of ops) {
    if (op !== 'add') throw new Error(`unsupported JSON Patch op ${String(op)}`);
    const tokens = path.split('/').slice(1).map(unescapePointer);
    const last = tokens.pop();
    if (last === undefined) throw new Error('JSON Patch on the document root is not supported');
    let parent = root as Record<string, unknown> | unknown[];
    for (const t of tokens) {
      const next = Array.isArray(parent) ? parent[Number(t)] : parent[t];
      if (next === null || typeof next !== 'object')
        throw new Error(`JSON Patch path ${path} does not exist`);
      parent = next as Record<string, unknown> | unknown[];
    }
    const copy = structuredClone(value);
    if (!Array.isArray(parent)) parent[last] = copy;
    else if (last === '-') parent.push(copy);
    else {
      const i = Number(last);
      if (!Number.isInteger(i) || i < 0 || i > parent.length)
        throw new Error(`JSON Patch index ${path} out of range`);
      parent.splice(i, 0, copy);
    }
  }
  return root as T;
}
