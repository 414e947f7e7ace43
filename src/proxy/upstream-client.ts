import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import type { Clock } from '../shared/clock.ts';
import { keepReadingAfterWriteError, type Dial } from './dial.ts';
import { OwnConnection } from './own-connection.ts';
import { ResponseWriter } from './response-writer.ts';
import { buildConnector, Pool, type Connector } from './undici-parts.ts';

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

/** undici's own TCP connector (its connect timeout, keep-alive and no-delay), as a Dial. */
function plainDial(connectTimeoutMs: number): Dial {
  const connect = buildConnector({ timeout: connectTimeoutMs });
  return (host, port, cb) =>
    connect({ hostname: host, protocol: 'http:', port: String(port) }, (err, socket) =>
      err || !socket ? cb(err ?? new Error('connect gave no socket')) : cb(null, socket),
    );
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
  | { kind: 'reset'; message: string }
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
  /** The client's body is chunked: the upstream's is too, whatever its size. */
  chunked: boolean;
  /** The body ended, without a byte, before this attempt. */
  emptyBody: boolean;
  /** The client sent Expect: 100-continue (and a body): the upstream is asked the same. */
  expectContinue: boolean;
  /** The upstream answered 100 Continue, or did not answer in time: the client may send its body. */
  onContinue(): void;
  /** Whether a status ends this attempt for a retry elsewhere (its body is drained, not sent on). */
  retryStatus(status: number): boolean;
  /** The request reached a connected upstream socket. */
  onConnected(): void;
  /** Exactly once per attempt, when its outcome is known. */
  settled(r: AttemptResult): void;
  /** After a 'response' outcome: the response is complete downstream, or was cut. */
  finished(): void;
  /** Edits the response headers before they are written (a route's ResponseHeaderModifier). */
  readonly editResponse?: ((headers: OutgoingHttpHeaders) => void) | undefined;
  /**
   * A route's limit on this attempt's wait for the response's headers, kept by the writer's own
   * timer: undici's timers tick about once a second, too coarse for a 500 ms route timeout.
   */
  readonly responseTimeoutMs?: number | undefined;
}

export class UpstreamClient {
  readonly #o: UpstreamClientOptions;
  readonly #pools: LRUCache<string, Pool>;
  /** Opens every upstream connection, pooled or of its own; its sockets keep reading after a failed write. */
  readonly #open: Dial;

  constructor(o: UpstreamClientOptions) {
    this.#o = o;
    const open = o.dial ?? plainDial(o.connectTimeoutMs);
    this.#open = (host, port, cb, namespace, meshed) =>
      open(
        host,
        port,
        (err, socket) => {
          if (!err && socket) keepReadingAfterWriteError(socket);
          cb(err, socket);
        },
        namespace,
        meshed,
      );
    this.#pools = new LRUCache({
      max: o.maxPools ?? 1_000,
      dispose: (pool) => void pool.destroy().catch(() => {}),
    });
  }

  /** Sends one attempt; the spec hears its outcome. */
  attempt(up: Endpoint, spec: AttemptSpec, res: ServerResponse): void {
    const handler = new ResponseWriter(res, spec, this.#o);
    // What undici cannot send as the client sent it: it refuses Expect (and takes a 100 for a
    // broken response), and frames an empty body with Content-Length or nothing.
    if (spec.expectContinue || (spec.chunked && spec.emptyBody))
      return new OwnConnection(up, spec, handler, this.#open, this.#o).start();
    try {
      this.#pool(up).dispatch(
        {
          path: spec.path,
          method: spec.method,
          headers: spec.headers as Record<string, string | string[]>,
          body: spec.chunked && spec.body ? unsized(spec.body) : spec.body,
        },
        handler,
      );
    } catch (e) {
      handler.onResponseError(undefined, e as Error);
    }
  }

  #connector(up: Endpoint): Connector {
    return (_opts, cb) =>
      this.#open(
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
        connect: this.#connector(up),
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
 * A chunked body as undici must see it to send it chunked: a stream that has already ended (a
 * small body that came whole before the attempt) has a known length, which undici sends as
 * Content-Length; an async iterable never has one.
 */
function unsized(body: Readable): Readable {
  const iterable: AsyncIterable<Buffer> = { [Symbol.asyncIterator]: () => body[Symbol.asyncIterator]() };
  // undici sends any async iterable as a body (its documentation says so; its types lag behind).
  return iterable as unknown as Readable;
}
