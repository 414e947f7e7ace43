import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/**
 * Header hygiene for both directions (RFC 9110 section 7.6.1): connection-specific headers and
 * every header named by Connection are dropped; an Upgrade handshake keeps Upgrade and
 * Connection: upgrade, which the tunnel needs.
 */
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'transfer-encoding',
  'upgrade',
  'trailer',
  'proxy-authenticate',
  'proxy-authorization',
]);

function connectionTokens(headers: IncomingHttpHeaders): string[] {
  const raw = headers.connection;
  if (!raw) return [];
  return String(raw)
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '');
}

export function stripHopByHop(headers: IncomingHttpHeaders, keepUpgrade = false): OutgoingHttpHeaders {
  // Per request on the hot path: the static set, plus the Connection tokens only when there are any.
  const named = connectionTokens(headers);
  const out: OutgoingHttpHeaders = {};
  for (const k in headers) {
    const v = headers[k];
    if (v !== undefined && !HOP_BY_HOP.has(k) && (named.length === 0 || !named.includes(k))) out[k] = v;
  }
  if (keepUpgrade && headers.upgrade) {
    out.connection = 'upgrade';
    out.upgrade = headers.upgrade;
  }
  return out;
}

/** Request headers for the upstream: hop-by-hop removed, the peer appended to X-Forwarded-For. */
export function upstreamRequestHeaders(
  headers: IncomingHttpHeaders,
  peer: string | undefined,
  upgrade = false,
): OutgoingHttpHeaders {
  const out = stripHopByHop(headers, upgrade);
  if (peer) {
    const client = peer.startsWith('::ffff:') ? peer.slice(7) : peer;
    const prior = headers['x-forwarded-for'];
    out['x-forwarded-for'] = prior ? `${String(prior)}, ${client}` : client;
  }
  return out;
}

/** Methods whose repetition has no additional effect (RFC 9110 section 9.2.2). */
export const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

export function hasBody(headers: IncomingHttpHeaders): boolean {
  if (headers['transfer-encoding'] !== undefined) return true;
  const cl = headers['content-length'];
  return cl !== undefined && cl !== '0';
}
