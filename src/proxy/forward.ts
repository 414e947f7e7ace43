import type { ClientRequest, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import './http-proxy-shim.ts';
import httpProxy from 'http-proxy';
import type { Clock, Timer } from '../shared/clock.ts';
import type { Outcome } from '../balance/balancer.ts';
import type { AgentPool } from './agents.ts';
import { BodyReplay } from './body-replay.ts';
import { IDEMPOTENT, requestFraming, stripHopByHop } from './headers.ts';
import type { Hop } from './observer.ts';
import { ERROR_HEADER, sendError, type ProxyErrorCode } from './status.ts';

/**
 * Forwards one HTTP request through http-proxy with keep-alive agents, trying endpoints one after
 * another where that is safe: after a failed connect (no byte reached the upstream) and, for
 * idempotent requests without a body, after a configured status. Retries draw on a budget.
 */
export interface Upstream {
  id: string;
  host: string;
  port: number;
}

export interface ForwardPlan {
  /** The next endpoint to try, never one already tried; undefined when none is left. */
  next(tried: ReadonlySet<string>): Upstream | undefined;
  /** Whether an endpoint not yet tried is left (no side effects). */
  canTry(tried: ReadonlySet<string>): boolean;
  /** Balancer feedback for one attempt. */
  start(up: Upstream): (outcome: Outcome) => void;
  retryStatuses: ReadonlySet<number>;
  maxAttempts: number;
  budget?: { tryWithdraw(): boolean };
}

export interface ForwardResult {
  status: number;
  errorCode?: ProxyErrorCode;
  errorMessage?: string;
}

export interface ForwarderOptions {
  agents: AgentPool;
  clock: Clock;
  connectTimeoutMs: number;
  /** From the whole request sent upstream to the response headers; 504 after it. */
  responseTimeoutMs: number;
  /** A response body or an upgraded tunnel without a byte either way for this long is closed. */
  idleTimeoutMs: number;
}

type AttemptResult =
  | { kind: 'response'; status: number; done: Promise<void> }
  | { kind: 'retry_status'; status: number }
  | { kind: 'connect_failure'; timedOut: boolean; message: string }
  | { kind: 'reset_reused'; message: string }
  | { kind: 'timeout'; message: string }
  | { kind: 'failed'; message: string }
  | { kind: 'client_gone' };

interface AttemptHooks {
  onProxyReq(proxyReq: ClientRequest): void;
  onProxyRes(proxyRes: IncomingMessage): void;
}

const CONNECT_ERRORS = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'EADDRNOTAVAIL',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNRESET',
  'EPIPE',
]);

export class Forwarder {
  readonly #o: ForwarderOptions;
  // toProxy: the request target goes upstream as the client sent it, not re-parsed by the
  // deprecated url.parse(), whose deprecation check walks the stack on every call (~25 µs of the
  // sidecar's CPU per request on the benchmark VM, docs/benchmarks.md) and which re-escapes
  // characters a signed path may rely on.
  readonly #proxy = httpProxy.createProxyServer({
    selfHandleResponse: true,
    xfwd: false,
    ws: true,
    toProxy: true,
  });
  readonly #hooks = new WeakMap<IncomingMessage, AttemptHooks>();

  constructor(o: ForwarderOptions) {
    this.#o = o;
    this.#proxy.on('proxyReq', (proxyReq, req) => this.#hooks.get(req)?.onProxyReq(proxyReq));
    this.#proxy.on('proxyRes', (proxyRes, req) => this.#hooks.get(req)?.onProxyRes(proxyRes));
    // Errors arrive through the per-call callback; this keeps an unexpected one from crashing.
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
    (this.#proxy as unknown as WebPasses).before('web', 'stream', (req) => frame(req));
    this.#proxy.on('error', () => {});
    this.#proxy.on('econnreset', () => {});
  }

  get proxy(): httpProxy {
    return this.#proxy;
  }

  /**
   * Runs the attempts and answers the request (the upstream response, or a proxy error). The
   * caller has already replaced req.headers with the sanitized upstream headers.
   */
  async forward(
    req: IncomingMessage,
    res: ServerResponse,
    plan: ForwardPlan,
    hop: Hop,
  ): Promise<ForwardResult> {
    const tried = new Set<string>();
    const framing = requestFraming(req);
    const bodiless = framing.kind === 'none';
    // A body is kept (bounded) only where a second attempt is possible; without a complete copy a
    // failed attempt is answered, never retried with what is left of the body.
    const replay = !bodiless && plan.maxAttempts > 1 ? new BodyReplay(req) : undefined;
    const statusRetryable = bodiless && IDEMPOTENT.has(req.method ?? '') && plan.retryStatuses.size > 0;
    const withdraw = (): boolean => !plan.budget || plan.budget.tryWithdraw();
    let last: AttemptResult | undefined;
    for (let attempt = 0; attempt < plan.maxAttempts; attempt++) {
      const up = plan.next(tried);
      if (!up) break;
      // A status retry was paid for when it was decided; a connect retry is paid for here.
      if (attempt > 0 && last?.kind !== 'retry_status' && !withdraw()) break;
      if (attempt > 0) hop.addRetry(retryReason(last));
      tried.add(up.id);
      hop.setEndpoint(up.host, up.port);
      const done = plan.start(up);
      const lastAttempt = attempt + 1 >= plan.maxAttempts;
      // Decided when the status arrives, so a status that cannot be retried reaches the client as it is.
      const retryStatus = (status: number): boolean =>
        statusRetryable &&
        !lastAttempt &&
        plan.retryStatuses.has(status) &&
        plan.canTry(new Set([...tried])) &&
        withdraw();
      const r = await this.#attempt(req, res, up, hop, retryStatus, replay);
      last = r;
      if (r.kind !== 'response' && res.writableEnded) {
        // The listener answered meanwhile (an upload that went idle: 408); that answer stands.
        done('cancelled');
        return answered(res);
      }
      switch (r.kind) {
        case 'response':
          done(r.status >= 500 ? 'server_error' : 'success');
          await r.done;
          return { status: r.status };
        case 'retry_status':
          done('server_error');
          continue;
        case 'connect_failure':
          done('connect_failure');
          if (bodiless || replay?.replayable) continue;
          return this.#fail(res, 'upstream_failed', `connect to ${up.host}:${up.port} failed: ${r.message}`);
        case 'reset_reused':
          done('cancelled');
          if (bodiless && IDEMPOTENT.has(req.method ?? '')) continue;
          return this.#fail(res, 'upstream_failed', `upstream ${up.host}:${up.port} reset: ${r.message}`);
        case 'timeout':
          done('timeout');
          return this.#fail(res, 'upstream_timeout', r.message);
        case 'failed':
          done('server_error');
          return this.#fail(res, 'upstream_failed', `upstream ${up.host}:${up.port} failed: ${r.message}`);
        case 'client_gone':
          done('cancelled');
          res.destroy();
          return { status: 0, errorMessage: 'client went away' };
      }
    }
    if (!last) return this.#fail(res, 'upstream_failed', 'no endpoint left to try');
    if (last.kind === 'retry_status') {
      // Only when the balancer offered an endpoint canTry() promised and then none: rare.
      return this.#fail(res, 'upstream_failed', `all tried endpoints answered ${last.status}`);
    }
    if (last.kind === 'connect_failure' && last.timedOut)
      return this.#fail(res, 'upstream_timeout', `connect timed out: ${last.message}`);
    const msg = 'message' in last ? last.message : '';
    return this.#fail(res, 'upstream_failed', `all ${tried.size} tried endpoints failed: ${msg}`);
  }

  #fail(res: ServerResponse, code: ProxyErrorCode, message: string): ForwardResult {
    return { status: sendError(res, code, message), errorCode: code, errorMessage: message };
  }

  #attempt(
    req: IncomingMessage,
    res: ServerResponse,
    up: Upstream,
    hop: Hop,
    retryStatus: (status: number) => boolean,
    replay: BodyReplay | undefined,
  ): Promise<AttemptResult> {
    return new Promise((resolve) => {
      let settled = false;
      let timedOut: 'connect' | 'response' | undefined;
      let reused = false;
      let connected = false;
      let gotResponse = false;
      let proxyReq: ClientRequest | undefined;
      const timers: Timer[] = [];
      const settle = (r: AttemptResult): void => {
        if (settled) return;
        settled = true;
        for (const t of timers) t.cancel();
        res.off('close', onClientClose);
        this.#hooks.delete(req);
        resolve(r);
      };
      // Before the attempt settles the response closes only if the client went away, or if the
      // listener answered itself (an upload that went idle).
      const onClientClose = (): void => {
        proxyReq?.destroy();
        settle({ kind: 'client_gone' });
      };
      res.on('close', onClientClose);
      // The response timeout runs from the moment the whole request has been sent upstream: an
      // upload takes as long as it takes (bounded by the listener's upload idle timeout).
      let waiting = false;
      const awaitResponse = (): void => {
        if (waiting || settled) return;
        waiting = true;
        timers.push(
          this.#o.clock.setTimer(this.#o.responseTimeoutMs, () => {
            timedOut = 'response';
            // Settled here, not by http-proxy's callback, which some failures never call.
            settle({ kind: 'timeout', message: `no response within ${this.#o.responseTimeoutMs} ms` });
            proxyReq?.destroy();
          }),
        );
      };
      // http-proxy never shows a request with Expect (no proxyReq event): time it from the start.
      if (req.headers.expect !== undefined) awaitResponse();
      this.#hooks.set(req, {
        onProxyReq: (pr) => {
          proxyReq = pr;
          pr.once('finish', awaitResponse);
          // Without a listener Node drops the socket and the attempt never ends (the client used
          // to wait forever); a 101 is only valid as the answer to an upgrade request.
          pr.on('upgrade', (_res, upstream: Socket) => {
            upstream.destroy();
            settle({
              kind: 'failed',
              message: 'upstream switched protocols on a request that asked for none',
            });
          });
          const socket: Socket | null = pr.socket;
          if (socket && socket.connecting) {
            const t = this.#o.clock.setTimer(this.#o.connectTimeoutMs, () => {
              timedOut = 'connect';
              pr.destroy();
            });
            timers.push(t);
            socket.once('connect', () => {
              connected = true;
              replay?.connected();
              t.cancel();
            });
          } else {
            reused = true;
            connected = true;
            replay?.connected();
          }
        },
        onProxyRes: (proxyRes) => {
          gotResponse = true;
          const status = proxyRes.statusCode ?? 502;
          if (retryStatus(status)) {
            proxyRes.resume();
            settle({ kind: 'retry_status', status });
            return;
          }
          const done = pipeResponse(proxyRes, res, this.#o.idleTimeoutMs);
          settle({ kind: 'response', status, done });
        },
      });
      const traceHeaders: OutgoingHttpHeaders = {};
      hop.inject(traceHeaders);
      this.#proxy.web(
        req,
        res,
        {
          target: { host: up.host, port: up.port, protocol: 'http:' } as unknown as string,
          agent: this.#o.agents.for(up.host, up.port),
          headers: traceHeaders as Record<string, string>,
          ...(replay ? { buffer: replay.attempt() } : {}),
          selfHandleResponse: true,
        },
        (err: NodeJS.ErrnoException) => {
          const message = err?.code ?? err?.message ?? 'error';
          if (timedOut === 'response')
            return settle({ kind: 'timeout', message: `no response within ${this.#o.responseTimeoutMs} ms` });
          if (timedOut === 'connect')
            return settle({
              kind: 'connect_failure',
              timedOut: true,
              message: `${this.#o.connectTimeoutMs} ms`,
            });
          if (gotResponse) return settle({ kind: 'failed', message });
          if (!connected && CONNECT_ERRORS.has(err?.code ?? ''))
            return settle({ kind: 'connect_failure', timedOut: false, message });
          if (reused && (err?.code === 'ECONNRESET' || err?.code === 'EPIPE'))
            return settle({ kind: 'reset_reused', message });
          settle({ kind: 'failed', message });
        },
      );
    });
  }
}

interface WebPasses {
  before(type: 'web', pass: 'stream', fn: (req: IncomingMessage) => void): void;
}

/**
 * The upstream request carries the client's framing. Transfer-Encoding is hop-by-hop and was
 * removed, and http-proxy turns a DELETE or OPTIONS without Content-Length into `Content-Length: 0`,
 * after which the body bytes would reach the upstream as a second request. Runs as http-proxy's
 * last pass before the upstream request is built.
 */
function frame(req: IncomingMessage): void {
  const framing = requestFraming(req);
  if (framing.kind === 'chunked') {
    delete req.headers['content-length'];
    req.headers['transfer-encoding'] = 'chunked';
  } else if (framing.kind === 'length') req.headers['content-length'] = String(framing.length);
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

/**
 * Writes the upstream response downstream with hop-by-hop headers removed. A body that stops
 * flowing (the upstream stalls, or the client stops reading) for idleMs closes both sides.
 */
function pipeResponse(proxyRes: IncomingMessage, res: ServerResponse, idleMs: number): Promise<void> {
  return new Promise((resolve) => {
    const headers = stripHopByHop(proxyRes.headers);
    try {
      res.writeHead(proxyRes.statusCode ?? 502, proxyRes.statusMessage, headers);
    } catch {
      // An upstream header Node refuses to write (invalid characters): fail the response, not the process.
      proxyRes.resume();
      res.destroy();
      resolve();
      return;
    }
    // The upstream request's timeout watches its socket; Node removes it when the response ends.
    (proxyRes as IncomingMessage & { req: ClientRequest }).req.setTimeout(idleMs, () => {
      proxyRes.destroy();
      res.destroy();
    });
    proxyRes.on('error', () => res.destroy());
    proxyRes.on('aborted', () => res.destroy());
    res.on('close', () => {
      if (!proxyRes.complete) proxyRes.destroy();
      resolve();
    });
    proxyRes.pipe(res);
  });
}
