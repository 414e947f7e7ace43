import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { pickBackend } from '../routes/backends.ts';
import {
  modifyHeaders,
  modifyPath,
  planFilters,
  redirectTo,
  type FilterPlan,
  type Headers,
} from '../routes/filters.ts';
import type { RequestView } from '../routes/match.ts';
import type { GatewayRouteTable, RuleTimeouts, Scheme, Selected } from '../routes/table.ts';
import type { ServiceBackend } from './table.ts';

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
      backend: ServiceBackend;
      /** Applied to the upstream request (its headers already carry the gateway's X-Forwarded-*). */
      editRequest: (req: { url?: string | undefined; headers: Headers }) => void;
      editResponse: ((headers: OutgoingHttpHeaders) => void) | undefined;
      timeouts: RuleTimeouts | undefined;
    };

export function matchHttpRoute(
  routes: GatewayRouteTable,
  scheme: Scheme,
  host: string,
  path: string,
  req: IncomingMessage,
): Selected | undefined {
  if (!routes.serves(scheme)) return undefined;
  const url = req.url ?? '';
  const q = url.indexOf('?');
  const view: RequestView = {
    method: req.method ?? 'GET',
    path,
    query: q < 0 ? '' : url.slice(q + 1),
    header: (name) => {
      const v = req.headers[name];
      return Array.isArray(v) ? v.join(', ') : v;
    },
  };
  return routes.lookup(scheme, host, view);
}

export function httpRouteAction(
  selected: Selected,
  line: { scheme: Scheme; host: string; path: string; search: string },
  random: () => number,
): HttpRouteAction {
  const rule = planFilters(selected.rule.filters);
  const at = { ...line, listenerPort: selected.listenerPort };
  if (rule.redirect) return { kind: 'redirect', ...redirectTo(rule.redirect, at, selected.prefix) };
  const chosen = pickBackend(selected.rule.backends, random);
  const where = `HTTPRoute ${selected.rule.route} rule ${selected.rule.index}`;
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
