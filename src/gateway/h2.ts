import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import {
  Http2ServerRequest,
  Http2ServerResponse,
  type IncomingHttpHeaders as H2Headers,
  type ServerHttp2Stream,
} from 'node:http2';

/**
 * An HTTP/2 stream at the gateway, seen as the HTTP/1 request the routing reads and, for a backend
 * that speaks HTTP/1.1, as the request and response the HTTP/1.1 forwarder relays (Node's HTTP/2
 * compatibility objects). So one routing path (HTTPRoute matches, filters, weights, timeouts,
 * Ingress rules) serves both versions; only the last hop differs.
 *
 * The request's headers are the regular fields with Host taken from :authority (RFC 9113 section
 * 8.3.1: a proxy forwarding to HTTP/1.1 builds Host from it); its method and target are its own
 * properties, since the forwarding path replaces the headers. Its raw header lines tell the body's
 * framing as an HTTP/1.1 client would have: a length when content-length came, chunked when the
 * stream did not end with its headers and came without one, none otherwise.
 */
export function h2Request(stream: ServerHttp2Stream, headers: H2Headers): IncomingMessage {
  const regular: IncomingHttpHeaders = {};
  const raw: string[] = [];
  for (const [k, v] of Object.entries(headers)) {
    if (k.startsWith(':') || v === undefined) continue;
    regular[k] = v;
    for (const one of Array.isArray(v) ? v : [v]) raw.push(k, one);
  }
  const authority = headers[':authority'];
  if (typeof authority === 'string') {
    if (regular.host === undefined) raw.push('host', authority);
    regular.host = authority;
  }
  if (!stream.endAfterHeaders && regular['content-length'] === undefined)
    raw.push('transfer-encoding', 'chunked');
  const req = new Http2ServerRequest(stream, regular, {}, raw);
  const own = (name: string, value: unknown): void =>
    void Object.defineProperty(req, name, { value, writable: true, enumerable: true, configurable: true });
  own('method', String(headers[':method'] ?? ''));
  own('url', String(headers[':path'] ?? ''));
  own('headers', regular);
  return req as unknown as IncomingMessage;
}

/**
 * The response of an HTTP/2 stream written as an HTTP/1.1 server writes one. HTTP/2 has no reason
 * phrase and no Connection header (RFC 9113 sections 8.3.2 and 8.2.2): both are left out here
 * rather than warned about by Node on every process's first one.
 */
class GatewayH2Response extends Http2ServerResponse {
  override writeHead(statusCode: number, a?: unknown, b?: unknown): this {
    const headers = (typeof a === 'string' ? b : a) as OutgoingHttpHeaders | undefined;
    if (headers && 'connection' in headers) {
      const { connection: _, ...rest } = headers;
      return super.writeHead(statusCode, rest);
    }
    return headers ? super.writeHead(statusCode, headers) : super.writeHead(statusCode);
  }

  override setHeader(name: string, value: number | string | readonly string[]): void {
    if (name.toLowerCase() !== 'connection') super.setHeader(name, value);
  }
}

export function h2Response(stream: ServerHttp2Stream): ServerResponse {
  return new GatewayH2Response(stream) as unknown as ServerResponse;
}

/**
 * The upstream request of an h2c backend from the one the routing built (HTTP/1 fields, Host as
 * rewritten by a filter): :authority from Host, :path from the (rewritten) target. `te: trailers`
 * is kept when the client sent it; gRPC servers require it.
 */
export function h2UpstreamHeaders(req: IncomingMessage, clientTe: unknown): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {
    ':method': req.method ?? 'GET',
    ':scheme': 'http',
    ':path': req.url ?? '/',
  };
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || k.startsWith(':')) continue;
    if (k === 'host') out[':authority'] = v;
    else out[k] = v;
  }
  if (clientTe === 'trailers') out.te = 'trailers';
  return out;
}
