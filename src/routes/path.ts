/**
 * The path a route is matched on, and the one the backend gets: RFC 3986 normalisation (section
 * 6.2.2), as Istio's default path normalisation and nginx do before matching. Percent-encoded
 * unreserved characters are decoded (so `%2e` is a dot) and dot-segments are removed, so
 * `/public/../internal` and `/public/%2e%2e/internal` are `/internal` and match only rules for
 * `/internal`. An encoded slash or backslash, or a raw backslash, has no one meaning (backends
 * differ on whether it separates segments), so such a request is refused instead of guessed at.
 */
export type NormalisedPath = { path: string } | { error: string };

const UNRESERVED_ESCAPE = /%(2[dDeE]|3[0-9]|[46][1-9a-fA-F]|[57][0-9aA]|5[fF]|7[eE])/g;
const AMBIGUOUS = /%(2f|5c)|\\/i;

export function normalisePath(raw: string): NormalisedPath {
  if (AMBIGUOUS.test(raw)) return { error: `ambiguous path ${raw}: encoded slash or backslash` };
  if (!raw.startsWith('/')) return { path: raw }; // OPTIONS *
  const decoded = raw.replace(UNRESERVED_ESCAPE, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  return { path: removeDotSegments(decoded) };
}

/** RFC 3986 section 5.2.4, on a path that starts with "/". */
export function removeDotSegments(path: string): string {
  const out: string[] = [];
  const segments = path.split('/').slice(1);
  segments.forEach((s, i) => {
    const last = i === segments.length - 1;
    if (s === '..') out.pop();
    if (s === '.' || s === '..') {
      if (last) out.push('');
      return;
    }
    out.push(s);
  });
  return '/' + out.join('/');
}
