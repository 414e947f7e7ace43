import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import './http-proxy-shim.ts';
import httpProxy from 'http-proxy';
import type { AttemptFeedback } from '../balance/balancer.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Clock } from '../shared/clock.ts';
import { BodyReplay } from './body-replay.ts';
import { expectsContinue, IDEMPOTENT, requestFraming } from './headers.ts';
import type { Hop } from './observer.ts';
import { ERROR_HEADER, sendError, type ProxyErrorCode } from './status.ts';
import type { AttemptResult, AttemptSpec, UpstreamClient } from './upstream-client.ts';

/**
 * Forwards one HTTP request, trying endpoints one after another where that is safe: after a failed
 * connect (no byte reached the upstream) and, for idempotent requests without a body, after a
 * connection closed under the request or a configured status. Retries draw on a budget. HTTP/1.1
 * requests go through the undici-based UpstreamClient; http-proxy keeps the WebSocket/Upgrade path.
 */
export interface Upstream {
  id: string;
  host: string;
  port: number;
  /** The namespace of the Service this endpoint belongs to (see Dial); none for passthrough. */
  namespace?: string;
  /** Whether discovery lists this endpoint as running a mesh listener (see Dial); unknown if unset. */
  meshed?: boolean;
  /** `id`, `namespace` and `meshed` in one string, made once per endpoint list (the HTTP/1.1 pools' key). */
  poolKey?: string;
}

export interface ForwardPlan {
  /** The next endpoint to try, never one already tried; undefined when none is left. */
  next(tried: ReadonlySet<string>): Upstream | undefined;
  /** Whether an endpoint not yet tried is left (no side effects). */
  canTry(tried: ReadonlySet<string>): boolean;
  /** Balancer feedback for one attempt. */
  start(up: Upstream): AttemptFeedback;
  retryStatuses: ReadonlySet<number>;
  maxAttempts: number;
  budget?: { tryWithdraw(): boolean };
  /** Edits the upstream's response headers before they are written. */
  editResponse?: (headers: OutgoingHttpHeaders) => void;
  /**
   * How long the request may wait for a response's headers, over all its attempts (a route's
   * `timeouts.request`): later attempts get what is left, and none starts once it is spent.
   */
  requestTimeoutMs?: number;
  /** How long one attempt may wait for the response's headers (a route's `timeouts.backendRequest`). */
  attemptTimeoutMs?: number;
}

export interface ForwardResult {
  status: number;
  errorCode?: ProxyErrorCode;
  errorMessage?: string;
}

export interface ForwarderOptions {
  client: UpstreamClient;
  /** For route timeouts. */
  clock: Clock;
  /** An upgraded tunnel without a byte either way for this long is closed. */
  idleTimeoutMs: number;
}

export class Forwarder {
  readonly #client: UpstreamClient;
  readonly #clock: Clock;
  // toProxy: the request target goes upstream as the client sent it, not re-parsed by the
  // deprecated url.parse() (whose deprecation check walks the stack on every call).
  readonly #proxy = httpProxy.createProxyServer({ xfwd: false, ws: true, toProxy: true });

  constructor(o: ForwarderOptions) {
    this.#client = o.client;
    this.#clock = o.clock;
    // http-proxy pipes upgraded sockets but never passes on a close without FIN: tie them. It
    // also clears the client socket's timeout (setupSocket), so the idle timeout is set here.
    this.#proxy.on('proxyReqWs', (proxyReq, _req, socket) => {
      const idle = o.idleTimeoutMs;
      socket.setTimeout(idle, () => socket.destroy());
      socket.once('close', () => proxyReq.destroy());
      proxyReq.on('upgrade', (_res, upstream) => {
        upstream.setTimeout(idle, () => upstream.destroy());
        socket.once('close', () => upstream.destroy());
        upstream.once('close', () => socket.destroy());
      });
    });
    // Errors arrive through the per-call callback; this keeps an unexpected one from crashing.
    this.#proxy.on('error', () => {});
    this.#proxy.on('econnreset', () => {});
  }

  /** http-proxy, for the WebSocket/Upgrade path. */
  get proxy(): httpProxy {
    return this.#proxy;
  }

  /**
   * Tunnels a WebSocket upgrade to one balanced endpoint. An upgrade is never retried: the
   * client's handshake is already on its way once the upstream is chosen. The caller has already
   * replaced req.headers with the sanitized upstream headers.
   */
  upgrade(
    req: IncomingMessage,
    socket: Socket,
    head: Buffer,
    plan: ForwardPlan,
    hop: Hop,
    fail: (code: ProxyErrorCode, detail: string) => void,
  ): void {
    const up = plan.next(NONE_TRIED);
    if (!up) return fail('upstream_failed', 'no endpoint');
    hop.setEndpoint(up.host, up.port);
    const done = plan.start(up);
    const trace: Record<string, string> = {};
    hop.inject(trace);
    Object.assign(req.headers, trace);
    this.#proxy.ws(
      req,
      socket,
      head,
      { target: { host: up.host, port: up.port } as unknown as string },
      (err: Error) => {
        done('connect_failure');
        fail('upstream_failed', `upgrade to ${up.host}:${up.port} failed: ${errorMessage(err)}`);
      },
    );
    socket.once('close', () => {
      done('success');
      hop.end({ status: 101 });
    });
  }

  /**
   * Runs the attempts and answers the request (the upstream response, or a proxy error). The
   * caller has already replaced req.headers with the sanitized upstream headers.
   */
  forward(req: IncomingMessage, res: ServerResponse, plan: ForwardPlan, hop: Hop): Promise<ForwardResult> {
    return new Promise((resolve) => {
      const call = new ForwardCall(this.#client, this.#clock, req, res, plan, hop, resolve);
      // A body in the same packet as the headers is parsed after this handler returns; a malformed
      // one destroys the connection then. Waiting for that keeps its request from the upstream
      // (undici writes the request head at once, Node's client only with the first body bytes).
      if (call.hasBody) process.nextTick(() => call.next());
      else call.next();
    });
  }
}

const NONE_TRIED: ReadonlySet<string> = new Set();

/**
 * The state of one forwarded request, which is also the spec of its attempts (one object per
 * request: no promise, closure or set unless a retry happens).
 */
class ForwardCall implements AttemptSpec {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  body: AttemptSpec['body'] = null;
  readonly chunked: boolean;
  emptyBody = false;
  readonly expectContinue: boolean;
  readonly editResponse: ((headers: OutgoingHttpHeaders) => void) | undefined;
  responseTimeoutMs: number | undefined;
  readonly #client: UpstreamClient;
  readonly #clock: Clock;
  readonly #req: IncomingMessage;
  readonly #res: ServerResponse;
  readonly #plan: ForwardPlan;
  readonly #hop: Hop;
  readonly #resolve: (r: ForwardResult) => void;
  readonly #bodiless: boolean;
  readonly #replay: BodyReplay | undefined;
  readonly #statusRetryable: boolean;
  #attempt = 0;
  #up: Upstream | undefined;
  /** Endpoints tried, once there is more than one attempt. */
  #tried: Set<string> | undefined;
  #feedback: AttemptFeedback | undefined;
  #last: AttemptResult | undefined;
  #status = 0;
  #continued = false;
  /** The clock's time by which the response must have begun (requestTimeoutMs). */
  readonly #deadline: number | undefined;

  constructor(
    client: UpstreamClient,
    clock: Clock,
    req: IncomingMessage,
    res: ServerResponse,
    plan: ForwardPlan,
    hop: Hop,
    resolve: (r: ForwardResult) => void,
  ) {
    this.#client = client;
    this.#clock = clock;
    this.#req = req;
    this.#res = res;
    this.#plan = plan;
    this.#hop = hop;
    this.#resolve = resolve;
    this.method = req.method ?? 'GET';
    this.path = req.url ?? '/';
    this.headers = req.headers;
    this.editResponse = plan.editResponse;
    this.responseTimeoutMs = plan.attemptTimeoutMs;
    this.#deadline = plan.requestTimeoutMs === undefined ? undefined : clock.now() + plan.requestTimeoutMs;
    const framing = requestFraming(req).kind;
    this.#bodiless = framing === 'none';
    this.chunked = framing === 'chunked';
    // The upstream is asked itself (the listener has not answered 100): see OwnConnection.
    this.expectContinue = !this.#bodiless && expectsContinue(req);
    if (this.headers.expect !== undefined) delete this.headers.expect;
    // A body is kept (bounded) only where a second attempt is possible.
    this.#replay = this.#bodiless ? undefined : new BodyReplay(req, plan.maxAttempts > 1 ? undefined : 0);
    this.#statusRetryable = this.#bodiless && IDEMPOTENT.has(this.method) && plan.retryStatuses.size > 0;
  }

  get hasBody(): boolean {
    return !this.#bodiless;
  }

  #triedSet(): ReadonlySet<string> {
    return this.#tried ?? (this.#up ? new Set([this.#up.id]) : NONE_TRIED);
  }

  next(): void {
    if (this.#req.socket.destroyed) return this.#gone();
    const plan = this.#plan;
    if (this.#attempt >= plan.maxAttempts) return this.#exhausted();
    const tried = this.#triedSet();
    const up = plan.next(tried);
    if (!up) return this.#exhausted();
    if (this.#deadline !== undefined) {
      const left = Math.floor(this.#deadline - this.#clock.now());
      if (left <= 0) return this.#fail('upstream_timeout', `no response within the route's request timeout`);
      this.responseTimeoutMs = Math.min(left, plan.attemptTimeoutMs ?? left);
    }
    if (this.#attempt > 0) {
      // A status retry was paid for when it was decided; a connect retry is paid for here.
      if (this.#last?.kind !== 'retry_status' && !this.#withdraw()) return this.#exhausted();
      this.#hop.addRetry(retryReason(this.#last));
      this.#tried = new Set(tried).add(up.id);
    }
    this.#attempt++;
    this.#up = up;
    this.#hop.setEndpoint(up.host, up.port);
    this.#feedback = plan.start(up);
    this.#hop.inject(this.headers);
    this.body = this.#replay?.attempt() ?? null;
    // The parser has read the whole request (its 'end' event may not have been emitted yet).
    this.emptyBody = this.#req.complete && this.#req.readableLength === 0 && !this.#replay?.received;
    this.#client.attempt(up, this, this.#res);
  }

  #withdraw(): boolean {
    return !this.#plan.budget || this.#plan.budget.tryWithdraw();
  }

  /** Decided when the status arrives, so a status that cannot be retried reaches the client as it is. */
  retryStatus(status: number): boolean {
    return (
      this.#statusRetryable &&
      this.#attempt < this.#plan.maxAttempts &&
      this.#plan.retryStatuses.has(status) &&
      this.#plan.canTry(this.#triedSet()) &&
      this.#withdraw()
    );
  }

  onConnected(): void {
    this.#feedback?.ready?.();
    this.#replay?.connected();
  }

  onContinue(): void {
    if (this.#continued || this.#res.headersSent) return;
    this.#continued = true;
    this.#res.writeContinue();
  }

  settled(r: AttemptResult): void {
    this.#last = r;
    const up = this.#up!; // settled() follows an attempt, which set it
    const feedback = this.#feedback!;
    if (r.kind !== 'response' && this.#res.writableEnded) {
      // The listener answered meanwhile (an upload that went idle: 408); that answer stands.
      feedback('cancelled');
      return this.#end(answered(this.#res));
    }
    switch (r.kind) {
      case 'response':
        feedback(r.status >= 500 ? 'server_error' : 'success');
        this.#status = r.status;
        return; // finished() follows when the response is complete
      case 'retry_status':
        feedback('server_error');
        return this.next();
      case 'connect_failure':
        feedback('connect_failure');
        if (this.#bodiless || this.#replay?.replayable) return this.next();
        return this.#fail('upstream_failed', `connect to ${up.host}:${up.port} failed: ${r.message}`);
      case 'reset':
        feedback('cancelled');
        // RFC 9110 section 9.2.2: an idempotent request may be repeated when its connection closed
        // before any response; one with a body may have been acted on, and its body is gone.
        if (this.#bodiless && IDEMPOTENT.has(this.method)) return this.next();
        return this.#fail('upstream_failed', `upstream ${up.host}:${up.port} reset: ${r.message}`);
      case 'timeout':
        feedback('timeout');
        return this.#fail('upstream_timeout', r.message);
      case 'failed':
        feedback('server_error');
        return this.#fail('upstream_failed', `upstream ${up.host}:${up.port} failed: ${r.message}`);
      case 'client_gone':
        feedback('cancelled');
        return this.#gone();
    }
  }

  #gone(): void {
    this.#res.destroy();
    this.#end({ status: 0, errorMessage: 'client went away' });
  }

  /** The response taken in settled() is complete, or was cut. */
  finished(): void {
    this.#end({ status: this.#status });
  }

  /** The exchange is over: what is left of the request body goes to no attempt. */
  #end(r: ForwardResult): void {
    this.#replay?.discard();
    this.#resolve(r);
  }

  #exhausted(): void {
    const last = this.#last;
    if (!last) return this.#fail('upstream_failed', 'no endpoint left to try');
    if (last.kind === 'retry_status')
      // Only when the balancer offered an endpoint canTry() promised and then none: rare.
      return this.#fail('upstream_failed', `all tried endpoints answered ${last.status}`);
    if (last.kind === 'connect_failure' && last.timedOut)
      return this.#fail('upstream_timeout', `connect timed out: ${last.message}`);
    const msg = 'message' in last ? last.message : '';
    return this.#fail('upstream_failed', `all ${this.#attempt} tried endpoints failed: ${msg}`);
  }

  #fail(code: ProxyErrorCode, message: string): void {
    this.#end({ status: sendError(this.#res, code, message), errorCode: code, errorMessage: message });
  }
}

function answered(res: ServerResponse): ForwardResult {
  const code = res.getHeader(ERROR_HEADER);
  return {
    status: res.statusCode,
    ...(typeof code === 'string' ? { errorCode: code as ProxyErrorCode } : {}),
    errorMessage: 'answered by the listener',
  };
}

function retryReason(last: AttemptResult | undefined): string {
  if (!last) return 'unknown';
  if (last.kind === 'retry_status') return `status:${last.status}`;
  return last.kind;
}
