import { constants, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import type { Clock, Timer } from '../../shared/clock.ts';
import type { ServerLimits } from '../server.ts';
import { answerError } from './forward.ts';

/**
 * The HTTP/1.1 listener's timeouts applied to HTTP/2, where node:http2 has none of its own: an
 * idle connection is closed as a keep-alive one would be, and a request body that stops arriving
 * is answered 408 as on HTTP/1.1. The header size and count limits are node:http2 settings (see
 * stream-server.ts) plus the check here, which answers 431 like HTTP/1.1.
 */
const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR } = constants;

/**
 * Closes a session (GOAWAY) that has had no stream open for idleMs: a connection that never
 * sends a request, or stays silent after its last response. PINGs do not keep it open, as
 * HTTP/1.1 bytes between requests would not. 0 turns it off, like keepAliveTimeout.
 */
export class SessionIdle {
  readonly #session: Http2Session;
  readonly #idleMs: number;
  readonly #clock: Clock;
  #open = 0;
  #timer: Timer | undefined;

  constructor(session: Http2Session, idleMs: number, clock: Clock) {
    this.#session = session;
    this.#idleMs = idleMs;
    this.#clock = clock;
    this.#arm();
    session.once('close', () => this.#timer?.cancel());
  }

  /** A stream opened; it keeps the session until it closes. */
  track(stream: ServerHttp2Stream): void {
    this.#open++;
    this.#timer?.cancel();
    this.#timer = undefined;
    stream.once('close', () => {
      if (--this.#open === 0) this.#arm();
    });
  }

  #arm(): void {
    if (this.#idleMs <= 0 || this.#session.closed || this.#session.destroyed) return;
    this.#timer = this.#clock.setTimer(this.#idleMs, () => {
      if (this.#open === 0 && !this.#session.closed) this.#session.close();
    });
  }
}

/**
 * Bounds a request body as HTTP/1.1 does: no byte received for uploadIdleTimeoutMs, or (when set)
 * not complete within requestTimeoutMs. The answer is a 408 and RST_STREAM(NO_ERROR), which tells
 * the client to stop sending (RFC 9113 section 8.1); once the response has started, the stream is
 * reset (CANCEL), as HTTP/1.1 closes the connection then. A stream whose response is complete but
 * whose client keeps its side open is ended with NO_ERROR at the next check.
 *
 * Bytes the proxy has not read yet (while it routes, or while the upstream pushes back) count as
 * progress: only a silent client is timed out.
 */
export function watchRequestBody(stream: ServerHttp2Stream, limits: ServerLimits, clock: Clock): void {
  // 0 turns either bound off, as on HTTP/1.1.
  const idleMs = limits.uploadIdleTimeoutMs > 0 ? limits.uploadIdleTimeoutMs : Infinity;
  const start = clock.now();
  const totalAt = limits.requestTimeoutMs > 0 ? start + limits.requestTimeoutMs : Infinity;
  const first = Math.min(idleMs, totalAt - start);
  if (stream.endAfterHeaders || first === Infinity) return;
  let last = start;
  let timer: Timer | undefined;
  const touch = (): void => void (last = clock.now());
  // Counting chunks must not set the body flowing before the proxy reads it: listen once it flows.
  const onResume = (): void => {
    stream.off('resume', onResume);
    stream.on('data', touch);
  };
  stream.on('resume', onResume);
  const check = (): void => {
    if (stream.closed || stream.destroyed || requestEnded(stream)) return;
    // The response is complete: the rest of the body is not wanted, whether or not it moves.
    if (stream.writableEnded) return void stream.close(NGHTTP2_NO_ERROR);
    const now = clock.now();
    if (stream.readableLength > 0) last = now;
    const at = Math.min(last + idleMs, totalAt);
    if (now < at) {
      timer = clock.setTimer(at - now, check);
      return;
    }
    timedOut(
      stream,
      now >= totalAt
        ? `request not complete within ${limits.requestTimeoutMs} ms`
        : `no request body byte received for ${idleMs} ms`,
    );
  };
  timer = clock.setTimer(first, check);
  const stop = (): void => timer?.cancel();
  stream.once('end', stop);
  stream.once('close', stop);
}

function requestEnded(stream: ServerHttp2Stream): boolean {
  return stream.readableEnded || stream.state.remoteClose === 1;
}

function timedOut(stream: ServerHttp2Stream, detail: string): void {
  if (stream.headersSent) return void stream.close(NGHTTP2_CANCEL);
  answerError(stream, false, 'request_timeout', detail);
  stream.close(NGHTTP2_NO_ERROR);
}

/**
 * Request headers HTTP/1.1 would refuse with 431: more fields than maxHeaders (pseudo-headers
 * aside), or a header list larger than maxHeaderBytes, sized as RFC 9113 section 6.5.2 does
 * (name, value and 32 octets per field). node:http2 enforces the advertised size only once the
 * client has acknowledged the SETTINGS; a request sent before that is checked here.
 */
export function headersProblem(rawHeaders: string[], limits: ServerLimits): string | undefined {
  let fields = 0;
  let size = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    if (!name.startsWith(':')) fields++;
    size += name.length + (rawHeaders[i + 1] ?? '').length + 32;
  }
  if (fields > limits.maxHeaders) return `more than ${limits.maxHeaders} request headers`;
  if (size > limits.maxHeaderBytes) return `request headers larger than ${limits.maxHeaderBytes} bytes`;
  return undefined;
}
