import type { RouteMatch } from './objects.ts';

/**
 * One HTTPRouteMatch, compiled: a test on a request and the rank the spec orders matches by.
 *
 * Supported: path `Exact` and `PathPrefix` (element by element, a trailing slash of the prefix
 * ignored: `/abc` matches `/abc`, `/abc/` and `/abc/def`, not `/abcd`), header and query parameter
 * `Exact` (header names case-insensitive; of a repeated query parameter only the first counts),
 * and method. `RegularExpression` is refused (UnsupportedValue): V8's backtracking engine would
 * let any route author stall the gateway with one pattern, and the spec leaves the dialect to
 * the implementation.
 */
export interface RequestView {
  method: string;
  /** Normalised path, without the query. */
  path: string;
  /** The query string without `?` ('' when none). */
  query: string;
  header(name: string): string | undefined;
}

export interface CompiledMatch {
  test(req: RequestView): boolean;
  /** Compared element by element; a smaller rank wins. */
  rank: readonly number[];
  /** For ReplacePrefixMatch: the prefix that matched (a PathPrefix match only). */
  prefix?: string;
}

export type Compiled = { match: CompiledMatch } | { unsupported: string };

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH']);

/** The prefix without its trailing slash ('' for `/`, which matches every path). */
export const trimPrefix = (prefix: string): string => (prefix.endsWith('/') ? prefix.slice(0, -1) : prefix);

export function prefixMatches(prefix: string, path: string): boolean {
  const p = trimPrefix(prefix);
  return path === p || path.startsWith(p + '/') || p === '';
}

function firstQueryValue(query: string, name: string): string | undefined {
  if (!query) return undefined;
  for (const [k, v] of new URLSearchParams(query)) if (k === name) return v;
  return undefined;
}

export function compileMatch(m: RouteMatch): Compiled {
  const { type, value } = m.path;
  if (type !== 'Exact' && type !== 'PathPrefix') return { unsupported: `path match type ${type}` };
  const bad = [...m.headers, ...m.queryParams].find((v) => v.type !== 'Exact');
  if (bad) return { unsupported: `${bad.type} match on ${bad.name}` };
  if (m.method !== undefined && !METHODS.has(m.method)) return { unsupported: `method ${m.method}` };

  const headers = m.headers.map((h) => ({ name: h.name.toLowerCase(), value: h.value }));
  const queries = m.queryParams;
  const path =
    type === 'Exact' ? (p: string): boolean => p === value : (p: string): boolean => prefixMatches(value, p);
  const test = (req: RequestView): boolean =>
    path(req.path) &&
    (m.method === undefined || req.method === m.method) &&
    headers.every((h) => req.header(h.name) === h.value) &&
    queries.every((q) => firstQueryValue(req.query, q.name) === q.value);
  const rank = [
    type === 'Exact' ? 0 : 1,
    -(type === 'Exact' ? value.length : trimPrefix(value).length),
    m.method === undefined ? 1 : 0,
    -headers.length,
    -queries.length,
  ];
  return { match: { test, rank, ...(type === 'PathPrefix' ? { prefix: value } : {}) } };
}

export function compareRanks(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
