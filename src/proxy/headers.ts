import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http';

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

/**
 * Headers a Connection token cannot remove: Content-Length frames the message (RFC 9112
 * section 6), so dropping it would change what the next hop reads as the body; without Host the
 * app would take its host from elsewhere (or refuse the request).
 */
const NEVER_NAMED: ReadonlySet<string> = new Set(['content-length', 'host']);

const NO_TOKENS: readonly string[] = [];
/** What nearly every client sends: options that name no other header. */
const PLAIN_CONNECTION: ReadonlySet<string> = new Set(['keep-alive', 'Keep-Alive', 'close', 'Close']);

function connectionTokens(headers: IncomingHttpHeaders): readonly string[] {
  const raw = headers.connection;
  if (!raw || PLAIN_CONNECTION.has(raw)) return NO_TOKENS;
  return String(raw)
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t !== '' && !NEVER_NAMED.has(t));
}

const NOTHING: ReadonlySet<string> = new Set();

/** `drop`: more headers to leave out (built without them: deleting a property later is slower). */
export function stripHopByHop(
  headers: IncomingHttpHeaders,
  keepUpgrade = false,
  drop: ReadonlySet<string> = NOTHING,
): OutgoingHttpHeaders {
  // Per request on the hot path: the static set, plus the Connection tokens only when there are any.
  const named = connectionTokens(headers);
  const out: OutgoingHttpHeaders = {};
  for (const k in headers) {
    const v = headers[k];
    if (v !== undefined && !HOP_BY_HOP.has(k) && !drop.has(k) && (named.length === 0 || !named.includes(k)))
      out[k] = v;
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
  drop?: ReadonlySet<string>,
): OutgoingHttpHeaders {
  const out = stripHopByHop(headers, upgrade, drop);
  if (peer) {
    const client = peer.startsWith('::ffff:') ? peer.slice(7) : peer;
    const prior = headers['x-forwarded-for'];
    out['x-forwarded-for'] = prior ? `${String(prior)}, ${client}` : client;
  }
  return out;
}

/** Methods whose repetition has no additional effect (RFC 9110 section 9.2.2). */
export const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** How the client framed its request body (RFC 9112 section 6.3). */
export type BodyFraming = { kind: 'none' } | { kind: 'chunked' } | { kind: 'length'; length: number };

const CHUNKED: BodyFraming = { kind: 'chunked' };
const NO_BODY: BodyFraming = { kind: 'none' };

/**
 * The framing the client actually used, from the raw header lines: req.headers is replaced by the
 * sanitized upstream headers (without Transfer-Encoding) before forwarding, so it cannot tell.
 * Node's parser has already refused every other Transfer-Encoding and any malformed length.
 */
export function requestFraming(req: IncomingMessage): BodyFraming {
  let length: number | undefined;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? '';
    // Only the two names that matter are lowercased: no string per header on the request path.
    if (name.length === 17 && name.toLowerCase() === 'transfer-encoding') return CHUNKED;
    if (name.length === 14 && name.toLowerCase() === 'content-length') length = Number(raw[i + 1]);
  }
  return length ? { kind: 'length', length } : NO_BODY;
}

const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\//i;
const ORIGIN_FORM: { absolute?: URL } = Object.freeze({});

/**
 * The request target must be origin-form (`/path`), `*`, or absolute-form (RFC 9112 section 3.2);
 * an absolute-form target becomes origin-form and Host becomes its authority (section 3.2.2), so
 * the next hop cannot be told two different hosts. Returns the absolute-form URL if there was one,
 * or an error for anything else.
 */
export function toOriginForm(req: IncomingMessage): { absolute?: URL } | { error: string } {
  const url = req.url ?? '';
  if (!ABSOLUTE_FORM.test(url))
    return url.startsWith('/') || url === '*' ? ORIGIN_FORM : { error: 'malformed request target' };
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { error: 'malformed absolute-form request target' };
  }
  if (u.host === '') return { error: 'absolute-form request target without a host' };
  req.headers.host = u.host;
  req.url = (u.pathname || '/') + u.search;
  return { absolute: u };
}

/** Node's test for the expectation it hands to 'checkContinue' (HTTP/1.1 requests only). */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

/**
 * The client sent Expect: 100-continue and waits for a 100 before its body. From the raw header
 * lines, as Node's server saw them: req.headers is replaced by the upstream headers (from which a
 * Connection header may have removed Expect) before forwarding.
 */
export function expectsContinue(req: IncomingMessage): boolean {
  if (req.httpVersion !== '1.1') return false;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2)
    if (raw[i]?.length === 6 && raw[i]?.toLowerCase() === 'expect') return CONTINUE.test(raw[i + 1] ?? '');
  return false;
}

/**
 * The request has a body that has not been read whole (by the parser): an answer now comes
 * before the end of the request, and the connection cannot carry another one after it.
 */
export function bodyUnread(req: IncomingMessage | undefined): boolean {
  return req !== undefined && !req.complete && requestFraming(req).kind !== 'none';
}
