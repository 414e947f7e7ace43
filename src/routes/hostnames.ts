/**
 * Gateway API hostnames: exact names, or `*.suffix` matching any name with one or more labels
 * before the suffix (`*.example.com` matches `a.example.com` and `a.b.example.com`, never
 * `example.com`). '' stands for "any host".
 */
export const isWildcard = (h: string): boolean => h.startsWith('*.');

/** Whether `host` (exact or itself a wildcard) lies within `pattern`. */
export function within(pattern: string, host: string): boolean {
  if (pattern === '' || pattern === host) return true;
  if (!isWildcard(pattern)) return false;
  const suffix = pattern.slice(1); // ".example.com"
  const rest = isWildcard(host) ? host.slice(1) : host;
  return rest.endsWith(suffix) && rest.length > suffix.length;
}

/** Whether two hostnames (exact, wildcard or '') have a host in common. */
export const overlaps = (a: string, b: string): boolean => within(a, b) || within(b, a);

/**
 * The hostnames a route serves on a listener: the route's hostnames that lie within the
 * listener's (or the listener's own, when it is the narrower), the listener's when the route has
 * none, and [''] when neither names one. Empty: no intersection, the route is not attached there.
 */
export function intersect(listener: string | undefined, route: readonly string[]): string[] {
  const l = listener ?? '';
  if (route.length === 0) return [l];
  const out = new Set<string>();
  for (const r of route) {
    if (within(l, r)) out.add(r);
    else if (within(r, l)) out.add(l);
  }
  return [...out];
}

/**
 * The keys a request's host is looked up under, most specific first: the host itself, then each
 * wildcard that covers it from the longest suffix down, then ''.
 */
export function lookupKeys(host: string): string[] {
  const keys = [host];
  for (let i = host.indexOf('.'); i >= 0 && i < host.length - 1; i = host.indexOf('.', i + 1)) {
    keys.push('*' + host.slice(i));
  }
  keys.push('');
  return keys;
}
