import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from '../shared/node-http.ts';
import { Socket } from 'node:net';
import { systemClock, type Clock, type Timer } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import { requestFraming } from './headers.ts';
import { sendError, writeSocketError, type ProxyErrorCode } from './status.ts';

/**
 * An http.Server with the limits a sidecar needs: Node's strict
 * parser (never insecureHTTPParser), bounded header size and count (431), a headers timeout that
 * cuts off slowloris clients, a whole-request timeout, and parse errors answered with 400 and a
 * close instead of an exception.
 */
export interface ServerLimits {
  maxHeaderBytes: number;
  maxHeaders: number;
  headersTimeoutMs: number;
  /**
   * Node's whole-request deadline (headers and body); 0 turns it off. Off by default: a large
   * upload may legitimately take longer than any fixed deadline, so uploads are bounded by
   * idleness (uploadIdleTimeoutMs) instead, as Envoy's stream idle timeout does.
   */
  requestTimeoutMs: number;
  /** A request body with no byte received for this long is answered 408 and its connection closed. */
  uploadIdleTimeoutMs: number;
  /** Idle time of a client keep-alive connection between requests. */
  keepAliveTimeoutMs: number;
  /** How often Node checks the two timeouts above. */
  checkIntervalMs: number;
  /**
   * HTTP/2: streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS); a
   * stream above it is refused with REFUSED_STREAM, which clients retry.
   */
  maxConcurrentStreams: number;
  /**
   * A connection answered before its request body was read whole is closed after the answer;
   * what the client still sends is read and dropped for up to this long, and this many bytes,
   * first (a lingering close), so that the close does not reset the connection under the answer.
   */
  lingerMs: number;
  lingerBytes: number;
}

export const defaultLimits: ServerLimits = {
  maxHeaderBytes: 16 * 1024,
  // Envoy's default max_request_headers_count.
  maxHeaders: 100,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 0,
  uploadIdleTimeoutMs: 60_000,
  keepAliveTimeoutMs: 60_000,
  checkIntervalMs: 1_000,
  // The lowest value RFC 9113 (section 6.5.2) recommends advertising; Go's server uses 250.
  maxConcurrentStreams: 100,
  // nginx's lingering_timeout: 5 s is plenty for a client to read an answer already sent.
  lingerMs: 5_000,
  lingerBytes: 16 * 1024 * 1024,
};

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void;
export type StreamHandler = (req: IncomingMessage, socket: Socket, head: Buffer) => void;

/** The requests that become byte streams: WebSocket upgrades and CONNECT tunnels. */
export interface StreamHandlers {
  upgrade?: StreamHandler;
  connect?: StreamHandler;
}

/** Called for every request the limits reject before it reaches the handler. */
export type OnRejected = (code: ProxyErrorCode, status: number) => void;

export function createLimitedServer(
  limits: ServerLimits,
  onRequest: RequestHandler,
  log: Logger,
  onRejected: OnRejected = () => {},
  streams: StreamHandlers = {},
  clock: Clock = systemClock,
): Server {
  const server = createServer({
    // WebSocket is the one upgrade the proxy tunnels. Any other (h2c, which Java's HttpClient
    // offers on every http:// URL) is ignored, as RFC 9110 section 7.8 allows: the request goes
    // on as HTTP/1.1 without Upgrade and gets an HTTP/1.1 answer.
    shouldUpgradeCallback: (req: IncomingMessage) => streams.upgrade !== undefined && isWebSocket(req),
    maxHeaderSize: limits.maxHeaderBytes,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: limits.checkIntervalMs,
    // Checked below instead, so that the 400 carries x-outrigger-error like every other.
    requireHostHeader: false,
    insecureHTTPParser: false,
    joinDuplicateHeaders: false,
  });
  // Node silently drops headers past maxHeadersCount; keep one more so an excess is detectable.
  server.maxHeadersCount = limits.maxHeaders + 1;
  const request = (req: IncomingMessage, res: ServerResponse): void => {
    // A client that sends another request on a connection it was told is closing.
    if (lingering.has(req.socket)) return void req.socket.destroy();
    const problem = checkRequest(req, limits);
    if (problem) {
      onRejected(problem.code, sendError(res, problem.code, problem.detail, true));
      return;
    }
    if (requestFraming(req).kind !== 'none') {
      watchUpload(req, res, limits.uploadIdleTimeoutMs, clock);
      res.once('finish', () => {
        if (!req.complete) lingeringClose(req, limits, clock);
      });
    }
    try {
      onRequest(req, res);
    } catch (e) {
      log.error('request handler threw', { error: e });
      sendError(res, 'upstream_failed', 'internal proxy error');
    }
  };
  server.on('request', request);
  // Expect: 100-continue is the upstream's to answer: the handler relays its 100, or its refusal
  // (and the client never sends the body), instead of Node answering 100 at once.
  server.on('checkContinue', request);
  const checked =
    (handler: StreamHandler): StreamHandler =>
    (req, socket, head) => {
      if (lingering.has(socket)) return void socket.destroy();
      const problem = checkRequest(req, limits);
      if (problem) {
        onRejected(problem.code, writeSocketError(socket, problem.code, problem.detail));
        return;
      }
      handler(req, socket, head);
    };
  if (streams.upgrade) server.on('upgrade', checked(streams.upgrade));
  if (streams.connect) server.on('connect', checked(streams.connect));
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    const code = err.code ?? '';
    // Node's headers timeout also runs on a connection that has not sent a byte (a client's spare
    // pooled connection): no request was refused, so none is answered or counted (nginx closes
    // such a connection silently too).
    const silent = code === 'ERR_HTTP_REQUEST_TIMEOUT' && socket.bytesRead === 0;
    if (code === 'ECONNRESET' || !socket.writable || silent) {
      socket.destroy();
      return;
    }
    const ours: ProxyErrorCode =
      code === 'HPE_HEADER_OVERFLOW'
        ? 'headers_too_large'
        : code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 'request_timeout'
          : 'bad_request';
    const detail = {
      headers_too_large: 'request headers too large',
      request_timeout: 'request not received in time',
      bad_request: `malformed request (${code || 'parse error'})`,
    }[ours as 'bad_request'];
    onRejected(ours, writeSocketError(socket, ours, detail));
    log.debug('client error', { code });
  });
  return server;
}

/**
 * Answers 408 (or closes, once a response has started) when a request body stops arriving for
 * idleMs. Watches the socket's byte count rather than adding a 'data' listener, which would set
 * the body flowing before the proxy is ready to forward it.
 */
function watchUpload(req: IncomingMessage, res: ServerResponse, idleMs: number, clock: Clock): void {
  let seen = req.socket.bytesRead;
  let timer: Timer;
  const check = (): void => {
    if (req.complete || res.writableEnded || req.socket.destroyed) return;
    const now = req.socket.bytesRead;
    if (now !== seen) {
      seen = now;
      timer = clock.setTimer(idleMs, check);
      return;
    }
    if (res.headersSent) req.socket.destroy();
    else sendError(res, 'request_timeout', `no request body byte received for ${idleMs} ms`, true);
  };
  timer = clock.setTimer(idleMs, check);
  // Not kept alive (with the request and response) past the body or the exchange.
  const stop = (): void => timer.cancel();
  req.once('end', stop);
  res.once('close', stop);
}

/** What socket.destroySoon() registers to run once the socket is flushed: its destroy method. */
const nodeDestroy = Reflect.get(Socket.prototype, 'destroy') as () => void;

/** Connections being closed after an early answer: no further request on them is served. */
const lingering = new WeakSet<Socket>();

/**
 * Closes the connection of a request answered before its body was read whole (the proxy's 502,
 * an app's 401 to an upload it did not read), as Envoy does: that connection cannot carry another
 * request. Closing at once would reset it while the client is still sending, and a reset can
 * destroy the answer before the client reads it (RFC 9112 section 9.6); so, as nginx's lingering
 * close, the answer is followed by a FIN and the rest of the body is read and dropped until the
 * client closes, or for lingerMs, or lingerBytes.
 */
function lingeringClose(req: IncomingMessage, limits: ServerLimits, clock: Clock): void {
  const socket = req.socket;
  if (socket.destroyed || lingering.has(socket)) return;
  lingering.add(socket);
  // Node ends a Connection: close response's socket and destroys it once flushed
  // (socket.destroySoon()); the destroy waits for the linger instead.
  socket.removeListener('finish', nodeDestroy);
  socket.end();
  const timer = clock.setTimer(limits.lingerMs, () => socket.destroy());
  socket.once('close', () => timer.cancel());
  let left = limits.lingerBytes;
  req.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) socket.destroy();
  });
  req.resume();
}

function isWebSocket(req: IncomingMessage): boolean {
  return String(req.headers.upgrade ?? '')
    .split(',')
    .some((t) => t.trim().toLowerCase() === 'websocket');
}

function checkRequest(
  req: IncomingMessage,
  limits: ServerLimits,
): { code: 'bad_request' | 'headers_too_large'; detail: string } | undefined {
  if (req.rawHeaders.length / 2 > limits.maxHeaders)
    return { code: 'headers_too_large', detail: `more than ${limits.maxHeaders} request headers` };
  let hosts = 0;
  let lengths = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]?.toLowerCase();
    if (name === 'host') hosts++;
    else if (name === 'content-length') lengths++;
  }
  // RFC 9112 section 3.2: a repeated Host is a 400; a repeated Content-Length is a framing hazard.
  if (hosts > 1) return { code: 'bad_request', detail: 'repeated Host header' };
  if (hosts === 0 && req.httpVersion === '1.1') return { code: 'bad_request', detail: 'missing Host header' };
  if (lengths > 1) return { code: 'bad_request', detail: 'repeated Content-Length header' };
  return undefined;
}
