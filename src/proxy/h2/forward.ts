import {
  constants,
  type ClientHttp2Stream,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import type { Readable } from 'node:stream';
import type { Outcome } from '../../balance/balancer.ts';
import type { Clock, Timer } from '../../shared/clock.ts';
import { BodyReplay } from '../body-replay.ts';
import type { ForwardPlan, ForwardResult, Upstream } from '../forward.ts';
import type { Hop } from '../observer.ts';
import { ERROR_HEADER, statusOf, type ProxyErrorCode } from '../status.ts';
import { errorHeaders, formatGrpcTimeout, GrpcStatus, grpcStatusOfReset } from './grpc.ts';
import { H2OpenError, type H2SessionPool } from './session-pool.ts';

/**
 * Forwards one HTTP/2 stream (a gRPC call or any h2c request) to an endpoint the plan picks, so
 * each call is balanced on its own however long the client keeps its connection. The body and
 * the response are piped (flow-control windows pass back-pressure both ways), trailers are relayed
 * as they came. Another endpoint is tried only when nothing of the call reached an upstream's
 * application: the connection failed, or the stream was refused (REFUSED_STREAM, or above a
 * GOAWAY's last stream id), and the body seen so far is still held (64 KiB).
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

type Attempt =
  | {
      kind: 'response';
      up: ClientHttp2Stream;
      headers: IncomingHttpHeaders;
      endStream: boolean;
      /** Whether the response ended with END_STREAM (not with a reset). */
      complete: () => boolean;
      /** Trailers can arrive in the same read as the headers, before the relay listens. */
      trailers: () => IncomingHttpHeaders | undefined;
    }
  | { kind: 'connect_failure'; timedOut: boolean; message: string }
  | { kind: 'refused'; message: string }
  | { kind: 'reset'; code: number }
  | { kind: 'invalid'; message: string }
  /** routeMs: a route's timeout (request or backendRequest) ran out, not the listener's. */
  | { kind: 'timeout'; routeMs?: number }
  | { kind: 'deadline' }
  | { kind: 'client_gone' };

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM, NGHTTP2_INTERNAL_ERROR, NGHTTP2_FLAG_END_STREAM } = constants;

export class H2Forwarder {
  readonly #o: H2ForwarderOptions;

  constructor(o: H2ForwarderOptions) {
    this.#o = o;
  }

  get pool(): H2SessionPool {
    return this.#o.pool;
  }

  async forward(call: H2Call, plan: ForwardPlan, hop: Hop): Promise<H2Result> {
    const deadline = new Deadline();
    const start = this.#o.clock.now();
    const timer =
      call.timeoutMs === undefined
        ? undefined
        : this.#o.clock.setTimer(call.timeoutMs, () => deadline.expire());
    const remaining = (): number | undefined =>
      call.timeoutMs === undefined ? undefined : call.timeoutMs - (this.#o.clock.now() - start);
    try {
      return await this.#run(call, plan, hop, deadline, remaining);
    } finally {
      timer?.cancel();
    }
  }

  async #run(
    call: H2Call,
    plan: ForwardPlan,
    hop: Hop,
    signal: Deadline,
    remaining: () => number | undefined,
  ): Promise<H2Result> {
    const tried = new Set<string>();
    // A route's timeouts (Gateway API HTTPRoute timeouts.request and .backendRequest) bound the
    // wait for the response's headers: over all attempts, and per attempt.
    const routeDeadline =
      plan.requestTimeoutMs === undefined ? undefined : this.#o.clock.now() + plan.requestTimeoutMs;
    // The body is held (bounded) only where a second attempt is possible.
    const replay = plan.maxAttempts > 1 ? new BodyReplay(call.down) : undefined;
    let last: Attempt | undefined;
    for (let attempt = 0; attempt < plan.maxAttempts; attempt++) {
      const up = plan.next(tried);
      if (!up) break;
      if (attempt > 0) {
        if (!replay?.replayable || (plan.budget && !plan.budget.tryWithdraw())) break;
        hop.addRetry(last?.kind === 'refused' ? 'refused_stream' : 'connect_failure');
      }
      let routeMs = plan.attemptTimeoutMs;
      if (routeDeadline !== undefined) {
        const left = Math.floor(routeDeadline - this.#o.clock.now());
        if (left <= 0)
          return this.#fail(call, 'upstream_timeout', "no response within the route's request timeout");
        routeMs = Math.min(left, routeMs ?? left);
      }
      tried.add(up.id);
      hop.setEndpoint(up.host, up.port);
      // The balancer times the stream, not the session set-up (see AttemptFeedback.ready).
      const done = plan.start(up);
      const begin = (): void => done.ready?.();
      const headers = { ...call.headers };
      const left = remaining();
      if (left !== undefined) headers['grpc-timeout'] = formatGrpcTimeout(left);
      hop.inject(headers);
      const body = replay ? replay.attempt() : call.down;
      const r = await this.#attempt(call, up, headers, signal, body, begin, routeMs);
      last = r;
      switch (r.kind) {
        case 'response':
          replay?.connected();
          done(outcomeOf(r.headers, r.endStream));
          return this.#relay(call, r, signal, plan.editResponse);
        case 'connect_failure':
          done('connect_failure');
          continue;
        case 'refused':
          done('cancelled');
          continue;
        case 'deadline':
          done('cancelled');
          return this.#fail(
            call,
            'upstream_timeout',
            `deadline of ${call.timeoutMs} ms (grpc-timeout) exceeded`,
          );
        case 'timeout':
          done('timeout');
          return this.#fail(
            call,
            'upstream_timeout',
            r.routeMs === undefined
              ? `no response within ${this.#o.responseTimeoutMs} ms`
              : `no response within the route's timeout (${r.routeMs} ms)`,
          );
        case 'reset':
          done('server_error');
          return this.#fail(
            call,
            'upstream_failed',
            `upstream ${up.host}:${up.port} reset the stream (code ${r.code})`,
            grpcStatusOfReset(r.code),
          );
        case 'invalid':
          done('cancelled');
          return this.#fail(
            call,
            'bad_request',
            `request not forwardable: ${r.message}`,
            GrpcStatus.INTERNAL,
          );
        case 'client_gone':
          done('cancelled');
          return answered(call.down) ?? { status: 0, errorMessage: 'client went away' };
      }
    }
    if (!last) return this.#fail(call, 'upstream_failed', 'no endpoint left to try');
    if (last.kind === 'connect_failure' && last.timedOut)
      // Still UNAVAILABLE for gRPC: the call never started, so the client may retry it.
      return this.#fail(
        call,
        'upstream_timeout',
        `connect timed out: ${last.message}`,
        GrpcStatus.UNAVAILABLE,
      );
    const msg = 'message' in last ? last.message : last.kind;
    return this.#fail(call, 'upstream_failed', `all ${tried.size} tried endpoints failed: ${msg}`);
  }

  #attempt(
    call: H2Call,
    target: Upstream,
    headers: OutgoingHttpHeaders,
    signal: Deadline,
    body: Readable,
    opened: () => void,
    routeMs: number | undefined,
  ): Promise<Attempt> {
    return new Promise((resolve) => {
      let settled = false;
      let up: ClientHttp2Stream | undefined;
      let timer: Timer | undefined;
      // From the attempt's start (connect included) to the response's headers, as on HTTP/1.1.
      const routeTimer =
        routeMs === undefined
          ? undefined
          : this.#o.clock.setTimer(routeMs, () => settle({ kind: 'timeout', routeMs }));
      const settle = (r: Attempt): void => {
        if (settled) return;
        settled = true;
        timer?.cancel();
        routeTimer?.cancel();
        call.down.off('close', onClientClose);
        signal.listener = undefined;
        if (r.kind !== 'response') {
          body.unpipe();
          if (up && !up.closed) up.close(NGHTTP2_CANCEL);
        }
        resolve(r);
      };
      const onClientClose = (): void => settle({ kind: 'client_gone' });
      const onDeadline = (): void => settle({ kind: 'deadline' });
      if (signal.aborted) return settle({ kind: 'deadline' });
      if (call.down.closed || call.down.destroyed) return settle({ kind: 'client_gone' });
      call.down.once('close', onClientClose);
      signal.listener = onDeadline;
      this.#o.pool.request(target, headers, {}).then(
        (stream) => {
          up = stream;
          if (settled) {
            stream.close(NGHTTP2_CANCEL);
            return;
          }
          opened();
          const complete = watchEndStream(stream);
          stream.on('error', () => {});
          let trailers: IncomingHttpHeaders | undefined;
          stream.once('trailers', (t: IncomingHttpHeaders) => (trailers = t));
          // The HEADERS frame's own END_STREAM flag: endAfterHeaders is not yet set at this event.
          stream.once('response', (h, flags: number) =>
            settle({
              kind: 'response',
              up: stream,
              headers: h,
              endStream: (flags & NGHTTP2_FLAG_END_STREAM) !== 0,
              complete,
              trailers: () => trailers,
            }),
          );
          stream.once('close', () =>
            settle(
              stream.rstCode === NGHTTP2_REFUSED_STREAM
                ? { kind: 'refused', message: `${target.host}:${target.port} refused the stream` }
                : { kind: 'reset', code: stream.rstCode ?? NGHTTP2_INTERNAL_ERROR },
            ),
          );
          // gRPC calls are bounded by their own deadline only: a client-streaming call may
          // legitimately wait long for its answer.
          if (!call.grpc)
            stream.once('finish', () => {
              timer = this.#o.clock.setTimer(this.#o.responseTimeoutMs, () => settle({ kind: 'timeout' }));
            });
          body.pipe(stream);
        },
        (e: unknown) =>
          settle(
            !(e instanceof H2OpenError)
              ? { kind: 'invalid', message: (e as Error).message }
              : e.kind === 'refused'
                ? { kind: 'refused', message: e.message }
                : {
                    kind: 'connect_failure',
                    timedOut: e.timedOut,
                    message: `connect to ${target.host}:${target.port} failed: ${(e as Error).message}`,
                  },
          ),
      );
    });
  }

  /** The upstream response, body and trailers downstream; resolves when the call has ended. */
  #relay(
    call: H2Call,
    r: Extract<Attempt, { kind: 'response' }>,
    signal: Deadline,
    editResponse: ForwardPlan['editResponse'],
  ): Promise<H2Result> {
    const { down } = call;
    const { up } = r;
    const status = Number(r.headers[':status'] ?? 502);
    let grpcStatus = grpcStatusIn(r.headers);
    let errorCode: ProxyErrorCode | undefined;
    let errorMessage = '';
    return new Promise((resolve) => {
      const finish = (): void => {
        signal.listener = undefined;
        resolve({
          status,
          ...(grpcStatus === undefined ? {} : { grpcStatus }),
          ...(errorCode ? { errorCode, errorMessage } : {}),
        });
      };
      let trailers: OutgoingHttpHeaders | undefined;
      const onDeadline = (): void => {
        // The upstream call is cancelled; a gRPC client is told why in the trailers.
        errorCode = 'upstream_timeout';
        errorMessage = 'deadline exceeded while streaming';
        up.unpipe(down);
        up.close(NGHTTP2_CANCEL);
        if (!call.grpc) return void down.close(NGHTTP2_CANCEL);
        grpcStatus = GrpcStatus.DEADLINE_EXCEEDED;
        trailers = errorHeaders(true, 'upstream_timeout', 'deadline exceeded');
        delete trailers[':status'];
        delete trailers['content-type'];
        down.end();
      };
      if (down.closed || down.destroyed || down.headersSent) {
        up.close(NGHTTP2_CANCEL);
        const theirs = answered(down);
        return theirs ? resolve(theirs) : finish();
      }
      down.once('close', () => {
        if (!up.closed) up.close(NGHTTP2_CANCEL);
        finish();
      });
      // A route's ResponseHeaderModifier; a Trailers-Only answer's gRPC status stays where it is.
      const head = copyHeaders(r.headers);
      editResponse?.(head);
      try {
        if (r.endStream) {
          // Trailers-Only: one HEADERS frame with END_STREAM, kept as it came.
          down.respond(head, { endStream: true });
          return;
        }
        down.respond(head, { waitForTrailers: true });
      } catch {
        // A header Node refuses to write fails this call, not the process.
        up.close(NGHTTP2_CANCEL);
        down.close(NGHTTP2_INTERNAL_ERROR);
        return;
      }
      signal.listener = onDeadline;
      down.once('wantTrailers', () => {
        const got = r.trailers();
        if (!trailers && got) {
          trailers = copyHeaders(got);
          grpcStatus = grpcStatusIn(got) ?? grpcStatus;
        }
        try {
          down.sendTrailers(trailers ?? {});
        } catch {
          down.close(NGHTTP2_INTERNAL_ERROR);
        }
      });
      // Only END_STREAM ends the response downstream. RST_STREAM(NO_ERROR) is a clean end only
      // after it (RFC 9113 section 8.1: "stop sending the request body"); before it, the body
      // was cut, and a client without content-length would take the short body as whole.
      up.once('end', () => {
        if (r.complete()) down.end();
      });
      up.once('close', () => {
        if (errorCode || down.closed || r.complete()) return;
        // A reset is passed on with its code; NO_ERROR would read as "done" to the client.
        const code = up.rstCode ? up.rstCode : NGHTTP2_INTERNAL_ERROR;
        errorCode = 'upstream_failed';
        errorMessage = `upstream reset the stream (code ${up.rstCode ?? 'none'}) before its response ended`;
        if (call.grpc) grpcStatus = grpcStatusOfReset(code);
        down.close(code);
      });
      if (!call.grpc)
        down.setTimeout(this.#o.idleTimeoutMs, () => {
          up.close(NGHTTP2_CANCEL);
          down.close(NGHTTP2_CANCEL);
        });
      up.pipe(down, { end: false });
    });
  }

  #fail(call: H2Call, code: ProxyErrorCode, detail: string, grpcStatus?: number): H2Result {
    const headers = answerError(call.down, call.grpc, code, detail, grpcStatus);
    return {
      status: call.grpc ? 200 : statusOf[code],
      errorCode: code,
      errorMessage: detail,
      ...(call.grpc ? { grpcStatus: Number(headers['grpc-status']) } : {}),
    };
  }
}

/**
 * A call's grpc-timeout: expired once, heard by the one step waiting on it (the attempt, then the
 * relay). Not an AbortController: one per call, and an EventTarget with its listeners is costly
 * for something most calls (no grpc-timeout) never use.
 */
class Deadline {
  aborted = false;
  listener: (() => void) | undefined;

  expire(): void {
    if (this.aborted) return;
    this.aborted = true;
    const l = this.listener;
    this.listener = undefined;
    l?.();
  }
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

/**
 * Whether a client stream's response ended with END_STREAM. Node ends the readable side the same
 * way for END_STREAM and for RST_STREAM(NO_ERROR); only the order differs: END_STREAM ends it
 * while the stream is still open, a reset after the stream has been marked closed.
 */
function watchEndStream(stream: ClientHttp2Stream): () => boolean {
  let ended = false;
  const push = stream.push.bind(stream);
  stream.push = (chunk: unknown, encoding?: BufferEncoding): boolean => {
    if (chunk === null && !stream.closed) ended = true;
    return push(chunk, encoding);
  };
  return () => ended;
}

/** The string-keyed headers (Node adds a symbol listing sensitive ones, which is not ours to pass). */
function copyHeaders(h: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k] = v;
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
