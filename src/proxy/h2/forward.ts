import {
  constants,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import { Readable } from 'node:stream';
import type { AttemptFeedback, Outcome } from '../../balance/balancer.ts';
import type { Clock, Timer } from '../../shared/clock.ts';
import type { ForwardPlan, ForwardResult, Upstream } from '../forward.ts';
import type { Hop } from '../observer.ts';
import { ERROR_HEADER, statusOf, type ProxyErrorCode } from '../status.ts';
import { errorHeaders, formatGrpcTimeout, GrpcStatus, grpcStatusOfReset } from './grpc.ts';
import { H2OpenError, type H2SessionPool } from './session-pool.ts';

/**
 * Forwards one HTTP/2 stream (a gRPC call or any h2c request) to an endpoint the plan picks, so
 * each call is balanced on its own however long the client keeps its connection. The body and
 * the response stream through (a write that fills the window pauses the reader, so flow control
 * passes back-pressure both ways); trailers are relayed as they came. Another endpoint is tried
 * only when nothing of the call reached an upstream's application: the connection failed, or the
 * stream was refused (REFUSED_STREAM, or above a GOAWAY's last stream id), and the body seen so
 * far is still held (64 KiB).
 */
export interface H2ForwarderOptions {
  pool: H2SessionPool;
  clock: Clock;
  /** Non-gRPC requests: from the whole request sent upstream to the response headers. */
  responseTimeoutMs: number;
  /** Non-gRPC requests: a stream moving no byte for this long is reset. */
  idleTimeoutMs: number;
}

export interface H2Call {
  down: ServerHttp2Stream;
  /** The upstream request headers, pseudo-headers included, already cleaned. */
  headers: OutgoingHttpHeaders;
  grpc: boolean;
  /** The call's deadline (grpc-timeout), from now. */
  timeoutMs?: number;
}

export interface H2Result extends ForwardResult {
  grpcStatus?: number;
}

/** Why an attempt ended before a response: what the next attempt, or the call's answer, depends on. */
type Failure =
  { kind: 'connect_failure'; timedOut: boolean; message: string } | { kind: 'refused'; message: string };

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM, NGHTTP2_INTERNAL_ERROR, NGHTTP2_FLAG_END_STREAM } = constants;

/** Linkerd's rule for what may be sent again to another endpoint: the first 64 KiB of a body. */
const REPLAY_LIMIT = 64 * 1024;

const NONE_TRIED: ReadonlySet<string> = new Set();

/** For 'error' events, which would throw without a listener; a stream's errors are seen by 'close'. */
export const ignore = (): void => {};

export class H2Forwarder {
  readonly #o: H2ForwarderOptions;

  constructor(o: H2ForwarderOptions) {
    this.#o = o;
  }

  get pool(): H2SessionPool {
    return this.#o.pool;
  }

  forward(call: H2Call, plan: ForwardPlan, hop: Hop): Promise<H2Result> {
    return new Promise((resolve) => new H2Exchange(this.#o, call, plan, hop, resolve).next());
  }
}

/**
 * One forwarded stream, from its first attempt to the end of its response: one object per call,
 * whose handlers are its own fields (no promise, `once` wrapper or pipe per attempt), because a
 * gRPC call's own work is small and the garbage per call is what the proxy pays for in GC.
 */
class H2Exchange {
  readonly #o: H2ForwarderOptions;
  readonly #call: H2Call;
  readonly #down: ServerHttp2Stream;
  readonly #plan: ForwardPlan;
  readonly #hop: Hop;
  readonly #resolve: (r: H2Result) => void;
  #phase: 'attempt' | 'relay' | 'done' = 'attempt';
  #attempts = 0;
  /** Endpoints tried, once there is more than one attempt. */
  #tried: Set<string> | undefined;
  #endpoint: Upstream | undefined;
  #feedback: AttemptFeedback | undefined;
  #last: Failure | undefined;
  /** The current attempt's stream; undefined while a session is being found. */
  #up: ClientHttp2Stream | undefined;
  /** The call's grpc-timeout, from the clock's `#start`. */
  readonly #start: number;
  #deadline: Timer | undefined;
  /** A route's timeouts.request: the clock's time by which a response must have begun. */
  readonly #routeDeadline: number | undefined;
  #routeMs: number | undefined;
  #attemptTimer: Timer | undefined;
  /** Non-gRPC requests: from the whole request sent upstream to the response headers. */
  #responseTimer: Timer | undefined;
  // The request body: the first REPLAY_LIMIT bytes are kept while another attempt may need them.
  #kept: Buffer[] | undefined;
  #keptBytes = 0;
  #reading = false;
  #bodyEnded = false;
  // The response.
  #status = 0;
  #grpcStatus: number | undefined;
  #errorCode: ProxyErrorCode | undefined;
  #errorMessage = '';
  /** Whether the response ended with END_STREAM (not with a reset: see pushWatchingEnd). */
  #complete = false;
  #upTrailers: IncomingHttpHeaders | undefined;
  /** Our own trailers (a deadline hit while streaming), in place of the upstream's. */
  #trailers: OutgoingHttpHeaders | undefined;

  constructor(
    o: H2ForwarderOptions,
    call: H2Call,
    plan: ForwardPlan,
    hop: Hop,
    resolve: (r: H2Result) => void,
  ) {
    this.#o = o;
    this.#call = call;
    this.#down = call.down;
    this.#plan = plan;
    this.#hop = hop;
    this.#resolve = resolve;
    this.#start = o.clock.now();
    this.#routeDeadline =
      plan.requestTimeoutMs === undefined ? undefined : this.#start + plan.requestTimeoutMs;
    this.#kept = plan.maxAttempts > 1 ? [] : undefined;
    if (call.timeoutMs !== undefined) this.#deadline = o.clock.setTimer(call.timeoutMs, this.#onDeadline);
    this.#down.on('close', this.#onDownClose);
  }

  /** The next attempt, or the call's answer when none is left. */
  next(): void {
    if (this.#down.closed || this.#down.destroyed) return this.#gone();
    const plan = this.#plan;
    if (this.#endpoint) this.#tried ??= new Set([this.#endpoint.id]);
    const up = this.#attempts < plan.maxAttempts ? plan.next(this.#tried ?? NONE_TRIED) : undefined;
    if (!up) return this.#exhausted();
    if (this.#attempts > 0) {
      if (!this.#kept || (plan.budget && !plan.budget.tryWithdraw())) return this.#exhausted();
      this.#hop.addRetry(this.#last?.kind === 'refused' ? 'refused_stream' : 'connect_failure');
      this.#tried?.add(up.id);
    }
    this.#routeMs = plan.attemptTimeoutMs;
    if (this.#routeDeadline !== undefined) {
      const left = Math.floor(this.#routeDeadline - this.#o.clock.now());
      if (left <= 0) return this.#fail('upstream_timeout', "no response within the route's request timeout");
      this.#routeMs = Math.min(left, this.#routeMs ?? left);
    }
    this.#attempts++;
    this.#endpoint = up;
    this.#hop.setEndpoint(up.host, up.port);
    // The balancer times the stream, not the session set-up (see AttemptFeedback.ready).
    this.#feedback = plan.start(up);
    const headers = this.#call.headers;
    if (this.#call.timeoutMs !== undefined)
      headers['grpc-timeout'] = formatGrpcTimeout(this.#call.timeoutMs - (this.#o.clock.now() - this.#start));
    this.#hop.inject(headers);
    // From the attempt's start (connect included) to the response's headers, as on HTTP/1.1.
    if (this.#routeMs !== undefined)
      this.#attemptTimer = this.#o.clock.setTimer(this.#routeMs, this.#onRouteTimeout);
    let stream: ClientHttp2Stream | Promise<ClientHttp2Stream>;
    try {
      stream = this.#o.pool.request(up, headers, {});
    } catch (e) {
      return this.#notOpened(e);
    }
    if (stream instanceof Promise) stream.then(this.#opened, this.#notOpened);
    else this.#opened(stream);
  }

  readonly #opened = (stream: ClientHttp2Stream): void => {
    if (this.#phase !== 'attempt' || this.#up) return void stream.close(NGHTTP2_CANCEL);
    this.#up = stream;
    this.#feedback?.ready?.();
    stream.on('error', ignore);
    stream.on('response', this.#onResponse);
    stream.on('trailers', this.#onUpTrailers);
    stream.on('close', this.#onUpClose);
    stream.on('drain', this.#onUpDrain);
    // gRPC calls are bounded by their own deadline only: a client-streaming call may
    // legitimately wait long for its answer.
    if (!this.#call.grpc) stream.on('finish', this.#onUpFinish);
    this.#sendBody(stream);
  };

  readonly #notOpened = (e: unknown): void => {
    if (this.#phase !== 'attempt') return;
    if (!(e instanceof H2OpenError)) {
      this.#feedback?.('cancelled');
      return this.#fail(
        'bad_request',
        `request not forwardable: ${(e as Error).message}`,
        GrpcStatus.INTERNAL,
      );
    }
    const { host, port } = this.#endpoint!; // set by the attempt that failed
    this.#retry(
      e.kind === 'refused'
        ? { kind: 'refused', message: e.message }
        : {
            kind: 'connect_failure',
            timedOut: e.timedOut,
            message: `connect to ${host}:${port} failed: ${e.message}`,
          },
    );
  };

  /** An attempt that reached no application: another endpoint may take the call. */
  #retry(failure: Failure): void {
    this.#feedback?.(failure.kind === 'refused' ? 'cancelled' : 'connect_failure');
    this.#last = failure;
    this.#endAttempt();
    this.next();
  }

  /** Stops the current attempt: its stream hears nothing more of this call. */
  #endAttempt(): void {
    this.#stopTimers();
    const up = this.#up;
    if (!up) return;
    this.#up = undefined;
    if (this.#reading) this.#down.pause();
    this.#unlisten(up);
    if (!up.closed) up.close(NGHTTP2_CANCEL);
  }

  /** The body so far (kept for a retry), then the rest as it arrives, with back-pressure. */
  #sendBody(up: ClientHttp2Stream): void {
    if (this.#kept) for (const c of this.#kept) up.write(c);
    if (this.#bodyEnded) return void up.end();
    if (this.#reading) return void this.#down.resume();
    this.#reading = true;
    this.#down.on('data', this.#onDownData);
    this.#down.on('end', this.#onDownEnd);
  }

  readonly #onDownData = (chunk: Buffer): void => {
    if (this.#kept) {
      this.#keptBytes += chunk.length;
      if (this.#keptBytes > REPLAY_LIMIT) this.#kept = undefined;
      else this.#kept.push(chunk);
    }
    const up = this.#up;
    if (!up) return void this.#down.pause();
    if (!up.write(chunk)) this.#down.pause();
  };

  readonly #onDownEnd = (): void => {
    this.#bodyEnded = true;
    this.#up?.end();
  };

  readonly #onUpDrain = (): void => {
    this.#down.resume();
  };

  readonly #onUpFinish = (): void => {
    if (this.#phase === 'attempt')
      this.#responseTimer = this.#o.clock.setTimer(this.#o.responseTimeoutMs, this.#onResponseTimeout);
  };

  readonly #onRouteTimeout = (): void => {
    if (this.#phase !== 'attempt') return;
    this.#feedback?.('timeout');
    this.#fail('upstream_timeout', `no response within the route's timeout (${this.#routeMs} ms)`);
  };

  readonly #onResponseTimeout = (): void => {
    if (this.#phase !== 'attempt') return;
    this.#feedback?.('timeout');
    this.#fail('upstream_timeout', `no response within ${this.#o.responseTimeoutMs} ms`);
  };

  /** The upstream stream closed: before a response, a refusal or a reset; after, see #relayClosed. */
  readonly #onUpClose = (): void => {
    const up = this.#up!; // only the current attempt's stream has this listener
    if (this.#phase === 'relay') return this.#relayClosed(up);
    if (this.#phase !== 'attempt') return;
    const { host, port } = this.#endpoint!;
    if (up.rstCode === NGHTTP2_REFUSED_STREAM)
      return this.#retry({ kind: 'refused', message: `${host}:${port} refused the stream` });
    const code = up.rstCode ?? NGHTTP2_INTERNAL_ERROR;
    this.#feedback?.('server_error');
    this.#fail(
      'upstream_failed',
      `upstream ${host}:${port} reset the stream (code ${code})`,
      grpcStatusOfReset(code),
    );
  };

  readonly #onDownClose = (): void => {
    if (this.#phase === 'attempt') {
      this.#feedback?.('cancelled');
      this.#endAttempt();
      return this.#gone();
    }
    const up = this.#up;
    if (up && !up.closed) up.close(NGHTTP2_CANCEL);
    this.#finish();
  };

  readonly #onDeadline = (): void => {
    if (this.#phase === 'attempt') {
      this.#feedback?.('cancelled');
      return this.#fail('upstream_timeout', `deadline of ${this.#call.timeoutMs} ms (grpc-timeout) exceeded`);
    }
    if (this.#phase !== 'relay') return;
    // The upstream call is cancelled; a gRPC client is told why in the trailers.
    this.#errorCode = 'upstream_timeout';
    this.#errorMessage = 'deadline exceeded while streaming';
    const up = this.#up!;
    up.off('data', this.#onUpData);
    up.close(NGHTTP2_CANCEL);
    if (!this.#call.grpc) return void this.#down.close(NGHTTP2_CANCEL);
    this.#grpcStatus = GrpcStatus.DEADLINE_EXCEEDED;
    const trailers = errorHeaders(true, 'upstream_timeout', 'deadline exceeded');
    delete trailers[':status'];
    delete trailers['content-type'];
    this.#trailers = trailers;
    this.#down.end();
  };

  // The HEADERS frame's own END_STREAM flag: endAfterHeaders is not yet set at this event.
  readonly #onResponse = (headers: IncomingHttpHeaders, flags: number): void => {
    if (this.#phase !== 'attempt') return;
    this.#stopTimers();
    this.#kept = undefined;
    const endStream = (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
    this.#feedback?.(outcomeOf(headers, endStream));
    this.#phase = 'relay';
    this.#relay(this.#up!, headers, endStream);
  };

  /** The upstream response, body and trailers downstream; the call ends when the client's stream closes. */
  #relay(up: ClientHttp2Stream, headers: IncomingHttpHeaders, endStream: boolean): void {
    const down = this.#down;
    this.#status = Number(headers[':status'] ?? 502);
    this.#grpcStatus = grpcStatusIn(headers);
    if (down.closed || down.destroyed || down.headersSent) {
      up.close(NGHTTP2_CANCEL);
      return this.#finish(answered(down));
    }
    // A route's ResponseHeaderModifier; a Trailers-Only answer's gRPC status stays where it is.
    const head = copyHeaders(headers);
    this.#plan.editResponse?.(head);
    try {
      // Trailers-Only: one HEADERS frame with END_STREAM, kept as it came.
      down.respond(head, endStream ? { endStream: true } : { waitForTrailers: true });
    } catch {
      // A header Node refuses to write fails this call, not the process.
      up.close(NGHTTP2_CANCEL);
      down.close(NGHTTP2_INTERNAL_ERROR);
      return;
    }
    if (endStream) {
      // The answer is whole: neither a deadline nor the upstream stream's close changes it.
      this.#complete = true;
      this.#deadline?.cancel();
      return;
    }
    up.push = pushWatchingEnd;
    down.on('wantTrailers', this.#onWantTrailers);
    down.on('drain', this.#onDownDrain);
    up.on('data', this.#onUpData);
    up.on('end', this.#onUpEnd);
    if (!this.#call.grpc) down.setTimeout(this.#o.idleTimeoutMs, this.#onIdle);
  }

  readonly #onUpTrailers = (t: IncomingHttpHeaders): void => {
    this.#upTrailers = t;
  };

  readonly #onUpData = (chunk: Buffer): void => {
    if (!this.#down.write(chunk)) this.#up?.pause();
  };

  readonly #onDownDrain = (): void => {
    this.#up?.resume();
  };

  // Only END_STREAM ends the response downstream. RST_STREAM(NO_ERROR) is a clean end only
  // after it (RFC 9113 section 8.1: "stop sending the request body"); before it, the body
  // was cut, and a client without content-length would take the short body as whole.
  readonly #onUpEnd = (): void => {
    this.#complete ||= endedByEndStream(this.#up);
    if (this.#complete && !this.#errorCode) this.#down.end();
  };

  readonly #onWantTrailers = (): void => {
    const got = this.#upTrailers;
    if (!this.#trailers && got) {
      this.#trailers = copyHeaders(got);
      this.#grpcStatus = grpcStatusIn(got) ?? this.#grpcStatus;
    }
    try {
      this.#down.sendTrailers(this.#trailers ?? {});
    } catch {
      this.#down.close(NGHTTP2_INTERNAL_ERROR);
    }
  };

  readonly #onIdle = (): void => {
    this.#up?.close(NGHTTP2_CANCEL);
    this.#down.close(NGHTTP2_CANCEL);
  };

  #relayClosed(up: ClientHttp2Stream): void {
    this.#complete ||= endedByEndStream(up);
    if (this.#errorCode || this.#down.closed || this.#complete) return;
    // A reset is passed on with its code; NO_ERROR would read as "done" to the client.
    const code = up.rstCode ? up.rstCode : NGHTTP2_INTERNAL_ERROR;
    this.#errorCode = 'upstream_failed';
    this.#errorMessage = `upstream reset the stream (code ${up.rstCode ?? 'none'}) before its response ended`;
    if (this.#call.grpc) this.#grpcStatus = grpcStatusOfReset(code);
    this.#down.close(code);
  }

  /**
   * Our handlers off both streams once the call is over. node:http2 keeps every client stream
   * reachable until the next full collection (its request() defines an accessor with fresh
   * closures per stream, so an old-space map points at them), and whatever the stream's
   * listeners reach would be kept with it: this whole call, the app's stream included.
   */
  #detach(): void {
    const down = this.#down;
    down.off('close', this.#onDownClose);
    down.off('data', this.#onDownData);
    down.off('end', this.#onDownEnd);
    down.off('wantTrailers', this.#onWantTrailers);
    down.off('drain', this.#onDownDrain);
    if (this.#up) this.#unlisten(this.#up);
  }

  #unlisten(up: ClientHttp2Stream): void {
    up.off('response', this.#onResponse);
    up.off('trailers', this.#onUpTrailers);
    up.off('close', this.#onUpClose);
    up.off('drain', this.#onUpDrain);
    up.off('finish', this.#onUpFinish);
    up.off('data', this.#onUpData);
    up.off('end', this.#onUpEnd);
  }

  #stopTimers(): void {
    this.#attemptTimer?.cancel();
    this.#attemptTimer = undefined;
    this.#responseTimer?.cancel();
    this.#responseTimer = undefined;
  }

  /** The client's stream closed before a response: an answer the listener gave meanwhile (a 408) stands. */
  #gone(): void {
    this.#finish(answered(this.#down) ?? { status: 0, errorMessage: 'client went away' });
  }

  #exhausted(): void {
    const last = this.#last;
    if (!last) return this.#fail('upstream_failed', 'no endpoint left to try');
    if (last.kind === 'connect_failure' && last.timedOut)
      // Still UNAVAILABLE for gRPC: the call never started, so the client may retry it.
      return this.#fail('upstream_timeout', `connect timed out: ${last.message}`, GrpcStatus.UNAVAILABLE);
    const tried = this.#tried?.size ?? 1;
    this.#fail('upstream_failed', `all ${tried} tried endpoints failed: ${last.message}`);
  }

  /** Answers the client with a proxy error; the call is over. */
  #fail(code: ProxyErrorCode, detail: string, grpcStatus?: number): void {
    this.#endAttempt();
    const grpc = this.#call.grpc;
    const headers = answerError(this.#down, grpc, code, detail, grpcStatus);
    this.#finish({
      status: grpc ? 200 : statusOf[code],
      errorCode: code,
      errorMessage: detail,
      ...(grpc ? { grpcStatus: Number(headers['grpc-status']) } : {}),
    });
  }

  /** Resolves the call once: with `r`, or with what the relay saw. */
  #finish(r?: H2Result): void {
    if (this.#phase === 'done') return;
    this.#phase = 'done';
    this.#deadline?.cancel();
    this.#stopTimers();
    this.#detach();
    this.#resolve(
      r ?? {
        status: this.#status,
        ...(this.#grpcStatus === undefined ? {} : { grpcStatus: this.#grpcStatus }),
        ...(this.#errorCode ? { errorCode: this.#errorCode, errorMessage: this.#errorMessage } : {}),
      },
    );
  }
}

const END_STREAM = Symbol('endStream');
type WatchedStream = ClientHttp2Stream & { [END_STREAM]?: true };
// eslint-disable-next-line @typescript-eslint/unbound-method -- called with the stream as `this`
const readablePush = Readable.prototype.push;

/**
 * Node ends a client stream's readable side the same way for END_STREAM and for
 * RST_STREAM(NO_ERROR); only the order differs: END_STREAM ends it while the stream is still
 * open, a reset after the stream has been marked closed. One shared function, not a closure per
 * stream, so that the stream holds nothing of the call.
 */
function pushWatchingEnd(this: WatchedStream, chunk: unknown, encoding?: BufferEncoding): boolean {
  if (chunk === null && !this.closed) this[END_STREAM] = true;
  return readablePush.call(this, chunk, encoding);
}

function endedByEndStream(up: WatchedStream | undefined): boolean {
  return up?.[END_STREAM] === true;
}

/**
 * Answers a stream with a proxy error: Trailers-Only for gRPC, a status and a one-line body
 * otherwise. A stream whose response has already started is reset instead.
 */
export function answerError(
  down: ServerHttp2Stream,
  grpc: boolean,
  code: ProxyErrorCode,
  detail: string,
  grpcStatus?: number,
): OutgoingHttpHeaders {
  const headers = errorHeaders(grpc, code, detail, grpcStatus);
  if (down.closed || down.destroyed) return headers;
  if (down.headersSent) {
    down.close(NGHTTP2_INTERNAL_ERROR);
    return headers;
  }
  if (grpc) down.respond(headers, { endStream: true });
  else {
    down.respond(headers);
    down.end(`${detail}\n`);
  }
  return headers;
}

/** The listener answered the stream meanwhile (a request body that went idle: 408); that answer stands. */
function answered(down: ServerHttp2Stream): H2Result | undefined {
  if (!down.headersSent) return undefined;
  const code = down.sentHeaders[ERROR_HEADER];
  return {
    status: Number(down.sentHeaders[':status'] ?? 0),
    ...(typeof code === 'string' ? { errorCode: code as ProxyErrorCode } : {}),
    errorMessage: 'answered by the listener',
  };
}

/** The string-keyed headers (Node adds a symbol listing sensitive ones, which is not ours to pass). */
function copyHeaders(h: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const k in h) {
    const v = h[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}

function grpcStatusIn(h: IncomingHttpHeaders): number | undefined {
  const v = h['grpc-status'];
  return typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : undefined;
}

/**
 * Balancer feedback at the response headers (Linkerd's peak-EWMA measures the same), so a long
 * stream does not count as a slow endpoint. An upstream that answers UNAVAILABLE at once counts
 * as a failure, like a 503.
 */
function outcomeOf(headers: IncomingHttpHeaders, endStream: boolean): Outcome {
  const status = Number(headers[':status'] ?? 0);
  if (status >= 500) return 'server_error';
  if (endStream && grpcStatusIn(headers) === GrpcStatus.UNAVAILABLE) return 'server_error';
  return 'success';
}
