import type { OutgoingHttpHeaders } from 'node:http';
import { pickBackend, type ServiceTarget } from './backends.ts';
import {
  modifyHeaders,
  modifyPath,
  planFilters,
  redirectTo,
  type FilterPlan,
  type Headers,
} from './filters.ts';
import type { RequestView } from './match.ts';
import type { CompiledRule, RuleTimeouts } from './rules.ts';

/** What matches read of a request; `path` is the normalized path (no query). */
export function requestView(
  req: { method?: string | undefined; url?: string | undefined; headers: Headers },
  path: string,
): RequestView {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  return {
    method: req.method ?? 'GET',
    path,
    query: q < 0 ? '' : url.slice(q + 1),
    header: (name) => {
      const v = req.headers[name];
      return Array.isArray(v) ? v.join(', ') : v;
    },
  };
}

/** The rule a request matched, at a Gateway listener or at a sidecar's call to a Service. */
export interface RouteSelection {
  rule: CompiledRule;
  /** The PathPrefix that matched (for ReplacePrefixMatch). */
  prefix?: string;
  /** Where a redirect that names no port points: the listener's port, or the Service's. */
  listenerPort: number;
}

/**
 * A request matched by an HTTPRoute: what the gateway does with it. A redirect is answered at
 * once; otherwise one backendRef is drawn by weight and the rule's filters, then the backend's,
 * are applied in order: request headers and URL rewrites to the request that goes upstream,
 * response header edits to the answer. A backendRef that cannot be used, or a rule whose weights
 * are all 0, is answered 500 (route_backend_invalid).
 */
export type HttpRouteAction =
  | { kind: 'redirect'; status: number; location: string }
  | { kind: 'invalid'; detail: string }
  | {
      kind: 'forward';
      backend: ServiceTarget;
      /** Applied to the upstream request (its headers already carry the gateway's X-Forwarded-*). */
      editRequest: (req: { url?: string | undefined; headers: Headers }) => void;
      editResponse: ((headers: OutgoingHttpHeaders) => void) | undefined;
      timeouts: RuleTimeouts | undefined;
    };

export function httpRouteAction(
  selected: RouteSelection,
  line: { scheme: 'http' | 'https'; host: string; path: string; search: string },
  random: () => number,
): HttpRouteAction {
  const rule = planFilters(selected.rule.filters);
  const at = { ...line, listenerPort: selected.listenerPort };
  if (rule.redirect) return { kind: 'redirect', ...redirectTo(rule.redirect, at, selected.prefix) };
  const chosen = pickBackend(selected.rule.backends, random);
  const where = `${selected.rule.kind} ${selected.rule.route} rule ${selected.rule.index}`;
  if (!chosen) return { kind: 'invalid', detail: `${where} has no backend with a weight above 0` };
  if ('invalid' in chosen) return { kind: 'invalid', detail: `${where}: ${chosen.invalid.message}` };
  const own = planFilters(chosen.filters);
  if (own.redirect) return { kind: 'redirect', ...redirectTo(own.redirect, at, selected.prefix) };
  const plan: FilterPlan = {
    request: [...rule.request, ...own.request],
    response: [...rule.response, ...own.response],
    rewrite: [...rule.rewrite, ...own.rewrite],
  };
  return {
    kind: 'forward',
    backend: chosen.target,
    timeouts: selected.rule.timeouts,
    editRequest: (req) => {
      let path = line.path;
      for (const r of plan.rewrite) {
        if (r.hostname !== undefined) req.headers.host = r.hostname;
        if (r.path) path = modifyPath(path, r.path, selected.prefix);
      }
      if (path !== line.path) req.url = path + line.search;
      for (const m of plan.request) modifyHeaders(req.headers, m);
    },
    editResponse:
      plan.response.length === 0
        ? undefined
        : (headers) => {
            for (const m of plan.response) modifyHeaders(headers as Headers, m);
          },
  };
}
