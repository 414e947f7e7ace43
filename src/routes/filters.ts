import { trimPrefix } from './match.ts';
import type { Filter, HeaderModifier, PathModifier, Redirect } from './objects.ts';

/**
 * The core and extended HTTPRoute filters, applied in the order they are written (rule filters
 * first, then the chosen backend's): RequestHeaderModifier, ResponseHeaderModifier, URLRewrite
 * and RequestRedirect. Pure functions over a header record and a request line, so the gateway
 * and the sidecar apply them the same way.
 */
export type Headers = Record<string, string | string[] | undefined>;

/** set replaces, add appends to an existing value with a comma (RFC 9110 section 5.3), remove deletes; names are case-insensitive. */
export function modifyHeaders(headers: Headers, m: HeaderModifier): void {
  for (const { name, value } of m.set) headers[name.toLowerCase()] = value;
  for (const { name, value } of m.add) {
    const k = name.toLowerCase();
    const old = headers[k];
    headers[k] = old === undefined ? value : `${Array.isArray(old) ? old.join(',') : old},${value}`;
  }
  for (const name of m.remove) delete headers[name.toLowerCase()];
}

/**
 * A path after a ReplaceFullPath or ReplacePrefixMatch modifier. The matched prefix is replaced
 * by whole path elements: `/prefix/one/two` with prefix `/prefix/one` and replacement `/one` is
 * `/one/two`; replaced by `/` it is `/two`; the prefix alone becomes the replacement (or `/`).
 */
export function modifyPath(path: string, m: PathModifier, prefix: string | undefined): string {
  if (m.type === 'ReplaceFullPath') return m.replaceFullPath ?? '/';
  if (m.type !== 'ReplacePrefixMatch' || prefix === undefined) return path;
  const rest = path.slice(trimPrefix(prefix).length);
  const replacement = trimPrefix(m.replacePrefixMatch ?? '/');
  if (replacement === '') return rest === '' ? '/' : rest;
  return replacement + rest;
}

export interface RequestLine {
  scheme: 'http' | 'https';
  /** Host without port. */
  host: string;
  path: string;
  /** The query with its `?`, or ''. */
  search: string;
  /** The port of the listener the request arrived on. */
  listenerPort: number;
}

const WELL_KNOWN: Record<string, number> = { http: 80, https: 443 };

/**
 * The Location and status of a RequestRedirect. Unset parts keep the request's; the port is the
 * filter's, else the well-known port of a scheme the filter sets, else the listener's; a scheme's
 * well-known port is left out of the Location.
 */
export function redirectTo(
  r: Redirect,
  line: RequestLine,
  prefix: string | undefined,
): { status: number; location: string } {
  const scheme = r.scheme ?? line.scheme;
  const host = r.hostname ?? line.host;
  const port = r.port ?? (r.scheme !== undefined ? WELL_KNOWN[scheme] : line.listenerPort);
  const path = r.path ? modifyPath(line.path, r.path, prefix) : line.path;
  const authority = port === undefined || port === WELL_KNOWN[scheme] ? host : `${host}:${port}`;
  return { status: r.statusCode, location: `${scheme}://${authority}${path}${line.search}` };
}

/** What a list of filters does to a request: its redirect (the first wins), or the edits to make. */
export interface FilterPlan {
  redirect?: Redirect;
  request: HeaderModifier[];
  response: HeaderModifier[];
  rewrite: { hostname?: string; path?: PathModifier }[];
}

export function planFilters(filters: readonly Filter[]): FilterPlan {
  const plan: FilterPlan = { request: [], response: [], rewrite: [] };
  for (const f of filters) {
    if (f.requestHeaderModifier && f.type === 'RequestHeaderModifier')
      plan.request.push(f.requestHeaderModifier);
    else if (f.responseHeaderModifier && f.type === 'ResponseHeaderModifier')
      plan.response.push(f.responseHeaderModifier);
    else if (f.urlRewrite && f.type === 'URLRewrite') plan.rewrite.push(f.urlRewrite);
    else if (f.requestRedirect && f.type === 'RequestRedirect' && !plan.redirect)
      plan.redirect = f.requestRedirect;
  }
  return plan;
}
