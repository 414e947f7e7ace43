import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import { Pool, type buildConnector, type Dispatcher } from 'undici';
import type { Clock, Timer } from '../shared/clock.ts';
import { MESH_NO_CERTIFICATE, MESH_PEER_NAMESPACE, type Dial } from './dial.ts';
import { stripHopByHop } from './headers.ts';

/**
 * The HTTP/1.1 upstream client: one undici Pool per endpoint, and one attempt as a dispatch()
 * handler that writes the upstream response straight into the ServerResponse. undici's own connect,
 * headers and keep-alive timers replace per-request timers; in the benchmark's client comparison
 * (docs/benchmarks.md) this path costs the least CPU per request of Node's clients.
 */
export interface UpstreamClientOptions {
  clock: Clock;
  connectTimeoutMs: number;
  /**
   * From the whole request sent upstream to the response headers; 504 after it. (undici restarts
   * its headers timer when the body has been written, and does not fire it while an upload flows.)
   */
  responseTimeoutMs: number;
  /** A response body that stops flowing (upstream stalls, or the client stops reading) for this long is cut. */
  idleTimeoutMs: number;
  /** Idle time after which a pooled connection is closed (below the common 5 s server keep-alive). */
  idleSocketMs?: number;
  maxPools?: number;
  /**
   * Opens upstream connections instead of undici's connector (mutual TLS to meshed endpoints): the
   * callback gets a connected socket, or the connect error; it must always be called.
   */
  dial?: Dial;
}

export interface Endpoint {
  host: string;
  port: number;
  /** A stable "host:port" name of the endpoint, when the caller has one (no string per request). */
  id?: string;
  /** The endpoint's Service namespace, which a meshed server's identity must be of (see Dial). */
  namespace?: string;
  /** Whether discovery lists the endpoint as running a mesh listener (see Dial). */
  meshed?: boolean;
  /**
   * A stable name of the endpoint, its namespace and whether it is meshed, when the caller has
   * one: a pool's connector checks one namespace and dials one way, so an address also listed by a
   * Service of another namespace (a reused pod IP), dialled as a passthrough destination, or newly
   * listed as meshed, gets a pool of its own.
   */
  poolKey?: string;
}

export type AttemptResult =
  | { kind: 'response'; status: number }
  | { kind: 'retry_status'; status: number }
  | { kind: 'connect_failure'; timedOut: boolean; message: string }
  | { kind: 'reset_reused'; message: string }
  | { kind: 'timeout'; message: string }
  | { kind: 'failed'; message: string }
  | { kind: 'client_gone' };

/** One attempt's request and the callbacks that receive its outcome (methods: no closures). */
export interface AttemptSpec {
  method: string;
  path: string;
  /** Sanitized upstream request headers (no hop-by-hop, no Expect). */
  headers: OutgoingHttpHeaders;
  body: Readable | null;
  /** Whether a status ends this attempt for a retry elsewhere (its body is drained, not sent on). */
  retryStatus(status: number): boolean;
  /** The request reached a connected upstream socket. */
  onConnected(): void;
  /** Exactly once per attempt, when its outcome is known. */
  settled(r: AttemptResult): void;
  /** After a 'response' outcome: the response is complete downstream, or was cut. */
  finished(): void;
}

/** Errors that mean nothing reached the upstream: the connection never opened. */
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
  'UND_ERR_CONNECT_TIMEOUT',
  MESH_PEER_NAMESPACE,
  MESH_NO_CERTIFICATE,
]);

export class UpstreamClient {
  readonly #o: UpstreamClientOptions;
  readonly #pools: LRUCache<string, Pool>;

  constructor(o: UpstreamClientOptions) {
    this.#o = o;
    this.#pools = new LRUCache({
      max: o.maxPools ?? 1_000,
      dispose: (pool) => void pool.destroy().catch(() => {}),
    });
  }

  /** Sends one attempt; the spec hears its outcome. */
  attempt(up: Endpoint, spec: AttemptSpec, res: ServerResponse): void {
    const handler = new ResponseWriter(res, spec, this.#o);
    try {
      this.#pool(up).dispatch(
        {
          path: spec.path,
          method: spec.method,
          headers: spec.headers as Record<string, string | string[]>,
          body: spec.body,
        },
        handler,
      );
    } catch (e) {
      handler.onResponseError(undefined, e as Error);
    }
  }

  #connector(up: Endpoint): buildConnector.connector {
    const dial = this.#o.dial;
    return (_opts, cb) =>
      dial?.(
        up.host,
        up.port,
        (err, socket) =>
          !err && socket ? cb(null, socket) : cb(err ?? new Error('dial gave no socket'), null),
        up.namespace,
        up.meshed,
      );
  }

  #pool(up: Endpoint): Pool {
    const key = up.poolKey ?? up.id ?? `${up.host}:${up.port}`;
    let pool = this.#pools.get(key);
    if (!pool) {
      const host = up.host.includes(':') ? `[${up.host}]` : up.host;
      const idle = this.#o.idleSocketMs ?? 4_000;
      pool = new Pool(`http://${host}:${up.port}`, {
        pipelining: 1,
        connectTimeout: this.#o.connectTimeoutMs,
        headersTimeout: this.#o.responseTimeoutMs,
        // A body may stream for as long as it likes (server-sent events), but not stall.
        bodyTimeout: this.#o.idleTimeoutMs,
        keepAliveTimeout: idle,
        // A server's Keep-Alive hint may shorten the idle time, never lengthen it.
        keepAliveMaxTimeout: idle,
        ...(this.#o.dial ? { connect: this.#connector(up) } : {}),
      });
      this.#pools.set(key, pool);
    }
    return pool;
  }

  stats(): { pools: number; connected: number; free: number; pending: number } {
    let connected = 0;
    let free = 0;
    let pending = 0;
    for (const p of this.#pools.values()) {
      connected += p.stats.connected;
      free += p.stats.free;
      pending += p.stats.pending;
    }
    return { pools: this.#pools.size, connected, free, pending };
  }

  close(): void {
    this.#pools.clear();
  }
}

/**
 * One attempt: decides its outcome from undici's callbacks and, once the response is taken, copies
 * it into the ServerResponse (status, headers without hop-by-hop ones, body with backpressure,
 * trailers). An error before the response is classified for the retry logic: a failed connect, a
 * reset of a reused connection, a timeout, or any other failure.
 */
class ResponseWriter implements Dispatcher.DispatchHandler {
  readonly #res: ServerResponse;
  readonly #spec: AttemptSpec;
  readonly #o: UpstreamClientOptions;
  /** Runs only while the client is not reading (undici's body timer is off while paused). */
  #stalled: Timer | undefined;
  #controller: Dispatcher.DispatchController | undefined;
  #settled = false;
  #started = false;
  /** 'forward': the response goes downstream; 'drain': a status retry, its body is discarded. */
  #mode: 'none' | 'forward' | 'drain' | 'finished' = 'none';

  constructor(res: ServerResponse, spec: AttemptSpec, o: UpstreamClientOptions) {
    this.#res = res;
    this.#spec = spec;
    this.#o = o;
    res.on('close', this.#onClientClose);
  }

  /**
   * The response closed: the client went away, or (before the attempt settled) the listener answered
   * itself, e.g. a 408 for an upload that went idle. Either way this attempt is over.
   */
  readonly #onClientClose = (): void => {
    if (this.#settled && (this.#mode !== 'forward' || this.#res.writableFinished)) return;
    this.#controller?.abort(new Error('client went away'));
    this.#done({ kind: 'client_gone' });
    this.#finished();
  };

  /** The forwarded response is over (complete or cut): tell the spec once. */
  readonly #finished = (): void => {
    if (this.#mode !== 'forward') return;
    this.#mode = 'finished';
    if (this.#onDrain) this.#res.off('drain', this.#onDrain);
    this.#stalled?.cancel();
    this.#spec.finished();
  };

  /**
   * The client reads again after backpressure. Made on the first backpressure only: most responses
   * never meet any, and a listener per response would be garbage per response.
   */
  #onDrain: (() => void) | undefined;

  #waitForDrain(controller: Dispatcher.DispatchController): void {
    controller.pause();
    this.#onDrain ??= (): void => {
      this.#stalled?.cancel();
      this.#stalled = undefined;
      this.#controller?.resume();
    };
    if (!this.#stalled) this.#res.once('drain', this.#onDrain);
    this.#stalled ??= this.#o.clock.setTimer(this.#o.idleTimeoutMs, () => {
      this.#controller?.abort(new Error(`client read nothing for ${this.#o.idleTimeoutMs} ms`));
      this.#res.destroy();
      this.#finished();
    });
  }

  #done(r: AttemptResult): void {
    if (this.#settled) return;
    this.#settled = true;
    if (r.kind !== 'response') this.#res.off('close', this.#onClientClose);
    this.#spec.settled(r);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    this.#started = true;
    if (this.#settled) {
      controller.abort(new Error('client went away'));
      return;
    }
    this.#spec.onConnected();
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    if (this.#settled) return;
    if (this.#spec.retryStatus(status)) {
      this.#mode = 'drain';
      this.#done({ kind: 'retry_status', status });
      return;
    }
    const res = this.#res;
    try {
      res.writeHead(status, statusMessage, stripHopByHop(headers));
    } catch {
      // An upstream header Node refuses to write (invalid characters): fail the response, not the process.
      this.#mode = 'forward';
      this.#done({ kind: 'response', status });
      controller.abort(new Error('response headers refused'));
      res.destroy();
      this.#finished();
      return;
    }
    this.#mode = 'forward';
    this.#done({ kind: 'response', status });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#mode === 'forward' && !this.#res.write(chunk)) this.#waitForDrain(controller);
  }

  onResponseEnd(_controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.#mode !== 'forward') return;
    const res = this.#res;
    for (const _ in trailers) {
      // Trailers exist only on a chunked response; Node writes them when the response is chunked.
      try {
        res.addTrailers(stripHopByHop(trailers));
      } catch {
        // invalid trailer characters: the body is complete, the trailers are dropped
      }
      break;
    }
    res.end(this.#finished);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    if (this.#mode === 'forward') {
      // The response was under way: all that is left is to cut it, so the client sees it incomplete.
      this.#res.destroy();
      this.#finished();
      return;
    }
    if (this.#mode !== 'none' || this.#settled) return;
    this.#done(this.#classify(err));
  }

  #classify(err: NodeJS.ErrnoException & { socket?: { bytesRead?: number } }): AttemptResult {
    const code = err.code ?? '';
    const message = code || err.message || 'error';
    if (code === 'UND_ERR_HEADERS_TIMEOUT')
      return { kind: 'timeout', message: `no response within ${this.#o.responseTimeoutMs} ms` };
    if (!this.#started && CONNECT_ERRORS.has(code)) {
      const timedOut = code === 'UND_ERR_CONNECT_TIMEOUT';
      return {
        kind: 'connect_failure',
        timedOut,
        message: timedOut ? `${this.#o.connectTimeoutMs} ms` : message,
      };
    }
    // A connection that already carried a response and is closed under the next request: the
    // classic race with a server closing an idle keep-alive connection.
    const reused = (err.socket?.bytesRead ?? 0) > 0;
    if (reused && (code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE'))
      return { kind: 'reset_reused', message: `reset before any response (${message})` };
    return { kind: 'failed', message };
  }
}
