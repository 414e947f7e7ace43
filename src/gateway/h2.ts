import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import {
  Http2ServerRequest,
  Http2ServerResponse,
  type IncomingHttpHeaders as H2Headers,
  type ServerHttp2Stream,
} from 'node:http2';
import { Duplex } from 'node:stream';

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

/**
 * An HTTP/1.1 exchange seen as the HTTP/2 stream the HTTP/2 forwarder serves (the request body to
 * read, the response to write, its trailers and resets), so that an HTTP/1.1 client reaches an
 * h2c backend through the same forwarder as an HTTP/2 client: one stream per request, balanced,
 * connect failures retried. The response goes out as HTTP/1.1 (chunked when it has no length, its
 * trailers as chunked trailers); a reset cuts the connection, which is how HTTP/1.1 says the
 * response is incomplete.
 */
class H1Stream extends Duplex {
  headersSent = false;
  sentHeaders: OutgoingHttpHeaders = {};
  readonly #req: IncomingMessage;
  readonly #res: ServerResponse;
  #wantTrailers = false;
  #idle: { ms: number; onIdle: () => void; timer?: NodeJS.Timeout } | undefined;

  constructor(req: IncomingMessage, res: ServerResponse) {
    super({ autoDestroy: false, allowHalfOpen: true });
    this.#req = req;
    this.#res = res;
    req.on('data', (c: Buffer) => {
      this.#touch();
      if (!this.push(c)) req.pause();
    });
    req.once('end', () => this.push(null));
    res.once('close', () => {
      if (this.#idle?.timer) clearTimeout(this.#idle.timer);
      this.destroy();
    });
  }

  override _read(): void {
    this.#req.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (e?: Error | null) => void): void {
    this.#touch();
    if (this.#res.write(chunk)) done();
    else this.#res.once('drain', () => done());
  }

  override _final(done: (e?: Error | null) => void): void {
    // Trailers are asked for at the end of the body, as an HTTP/2 stream asks.
    if (this.#wantTrailers) this.emit('wantTrailers');
    this.#res.end();
    done();
  }

  respond(headers: OutgoingHttpHeaders, opts: { endStream?: boolean; waitForTrailers?: boolean } = {}): void {
    const out: OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(headers)) if (!k.startsWith(':') && v !== undefined) out[k] = v;
    this.#res.writeHead(Number(headers[':status'] ?? 502), out);
    this.headersSent = true;
    this.sentHeaders = headers;
    this.#wantTrailers = opts.waitForTrailers === true;
    if (opts.endStream) this.end();
  }

  sendTrailers(trailers: OutgoingHttpHeaders): void {
    if (Object.keys(trailers).length > 0) this.#res.addTrailers(trailers);
  }

  close(): void {
    this.#res.destroy();
  }

  /** The HTTP/2 stream's idle timeout: no byte either way for ms. */
  setTimeout(ms: number, onIdle: () => void): this {
    this.#idle = { ms, onIdle };
    this.#touch();
    return this;
  }

  #touch(): void {
    const idle = this.#idle;
    if (!idle) return;
    if (idle.timer) clearTimeout(idle.timer);
    idle.timer = setTimeout(idle.onIdle, idle.ms);
    idle.timer.unref();
  }
}

/** The HTTP/2 stream an HTTP/1.1 exchange stands for (see H1Stream). */
export function h1AsStream(req: IncomingMessage, res: ServerResponse): ServerHttp2Stream {
  return new H1Stream(req, res) as unknown as ServerHttp2Stream;
}
