import type { Compiled, CompiledMatch } from './match.ts';
import type { GRPCRouteMatch } from './objects.ts';

/**
 * One GRPCRouteMatch, compiled to the rule model HTTPRoute uses (a test and a rank). A gRPC call's
 * path is `/service/method`, so a method match with a service and a method is that exact path, a
 * service alone is the prefix `/service/` followed by one method, and a method alone is
 * `/<any service>/method`, which no HTTPRoute path match can say: the path is split once and both
 * parts compared exactly (case-sensitive), as the spec's Exact asks.
 *
 * The rank is the spec's GRPCRoute precedence (not HTTPRoute's): most characters in the matching
 * service, then in the matching method, then most header matches; hostnames, which the spec ranks
 * first, are not matched in the mesh. Headers match Exact with case-insensitive names, and of two
 * entries with one name only the first counts, as the spec says.
 *
 * `RegularExpression`, for the method or a header, is refused (UnsupportedValue), for the reason
 * HTTPRoute's is (match.ts): a backtracking engine would let any route author stall the proxy.
 * The call's content-type is not read: a GRPCRoute is matched on the path and headers, as the
 * proxies that translate it to HTTP routes do.
 */
export function compileGrpcMatch(m: GRPCRouteMatch): Compiled {
  const method = m.method;
  if (method && method.type !== 'Exact') return { unsupported: `method match type ${method.type}` };
  if (method && method.service === undefined && method.method === undefined)
    return { unsupported: 'a method match that names neither service nor method' };
  const bad = m.headers.find((h) => h.type !== 'Exact');
  if (bad) return { unsupported: `${bad.type} match on ${bad.name}` };

  const headers: { name: string; value: string }[] = [];
  for (const h of m.headers) {
    const name = h.name.toLowerCase();
    if (!headers.some((x) => x.name === name)) headers.push({ name, value: h.value });
  }
  const service = method?.service;
  const name = method?.method;
  const test: CompiledMatch['test'] = (req) => {
    if (method) {
      const rpc = rpcOfPath(req.path);
      if (!rpc) return false;
      if (service !== undefined && rpc.service !== service) return false;
      if (name !== undefined && rpc.method !== name) return false;
    }
    return headers.every((h) => req.header(h.name) === h.value);
  };
  return { match: { test, rank: [0 - (service?.length ?? 0), 0 - (name?.length ?? 0), 0 - headers.length] } };
}

/** The service and method of a gRPC path `/service/method`; undefined for any other path. */
export function rpcOfPath(path: string): { service: string; method: string } | undefined {
  const slash = path.indexOf('/', 1);
  if (!path.startsWith('/') || slash < 2 || slash === path.length - 1) return undefined;
  const method = path.slice(slash + 1);
  return method.includes('/') ? undefined : { service: path.slice(1, slash), method };
}
