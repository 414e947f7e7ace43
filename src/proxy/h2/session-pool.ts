import {
  connect,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type ClientSessionRequestOptions,
  type OutgoingHttpHeaders,
} from 'node:http2';
import { connect as netConnect } from 'node:net';
import type { Clock, Timer } from '../../shared/clock.ts';
import type { Upstream } from '../forward.ts';

/**
 * Upstream HTTP/2 (h2c, prior knowledge) sessions, pooled per endpoint. A stream goes on a session
 * with a free slot under the peer's SETTINGS_MAX_CONCURRENT_STREAMS; when every session is full
 * another is opened (Envoy's HTTP/2 pool does the same). A session that received GOAWAY takes no
 * new stream but finishes the ones it has; sessions are pinged so a dead peer is found without a
 * request failing on it, and closed after sitting idle.
 */
export interface H2PoolOptions {
  clock: Clock;
  connectTimeoutMs: number;
  /** Keep-alive PING period; a PING unanswered for pingTimeoutMs destroys the session. */
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  /** A session without a stream for this long is closed. */
  idleMs?: number;
}

/** Why no stream could be opened; 'connect' and 'refused' mean no byte reached the upstream. */
export class H2OpenError extends Error {
  readonly kind: 'connect' | 'refused';
  readonly timedOut: boolean;

  constructor(kind: 'connect' | 'refused', message: string, timedOut = false) {
    super(message);
    this.kind = kind;
    this.timedOut = timedOut;
  }
}

/** Windows well above the 64 KiB default so one stream can fill a fast link (node #38426). */
const STREAM_WINDOW = 1024 * 1024;
const SESSION_WINDOW = 8 * 1024 * 1024;

/** request() errors that mean the session can take no stream (nothing was sent). */
const SESSION_GONE: ReadonlySet<string> = new Set([
  'ERR_HTTP2_GOAWAY_SESSION',
  'ERR_HTTP2_INVALID_SESSION',
  'ERR_HTTP2_OUT_OF_STREAMS',
]);

interface Entry {
  session: ClientHttp2Session;
  ready: Promise<void>;
  active: number;
  /** GOAWAY received, or closing: finishes its streams, takes no new one. */
  draining: boolean;
  idle?: Timer;
}

export class H2SessionPool {
  readonly #o: Required<H2PoolOptions>;
  readonly #byEndpoint = new Map<string, Entry[]>();
  #closed = false;

  constructor(o: H2PoolOptions) {
    this.#o = { pingIntervalMs: 30_000, pingTimeoutMs: 10_000, idleMs: 300_000, ...o };
  }

  /**
   * Opens a stream to up. Rejects with H2OpenError when the endpoint cannot be reached or refuses
   * the stream before it is sent; the caller may then try another endpoint.
   */
  async request(
    up: Upstream,
    headers: OutgoingHttpHeaders,
    options: ClientSessionRequestOptions,
  ): Promise<ClientHttp2Stream> {
    // Bounded: each turn either returns or retires a session that could not take the stream.
    for (let turn = 0; turn < 8; turn++) {
      const entry = await this.#acquire(up);
      let stream: ClientHttp2Stream;
      try {
        stream = entry.session.request(headers, options);
      } catch (e) {
        entry.active--;
        // Headers Node refuses say nothing about the session: fail this request only.
        if (!SESSION_GONE.has((e as NodeJS.ErrnoException).code ?? '')) {
          this.#maybeIdle(up, entry);
          throw e;
        }
        // The session closed between the pick and the request (GOAWAY, out of stream ids).
        entry.draining = true;
        this.#maybeIdle(up, entry);
        if (turn === 7) throw new H2OpenError('refused', (e as Error).message);
        continue;
      }
      stream.once('close', () => {
        entry.active--;
        this.#maybeIdle(up, entry);
      });
      return stream;
    }
    throw new H2OpenError('refused', 'no session could take the stream');
  }

  stats(): { endpoints: number; sessions: number; streams: number } {
    let sessions = 0;
    let streams = 0;
    for (const list of this.#byEndpoint.values()) {
      sessions += list.length;
      for (const e of list) streams += e.active;
    }
    return { endpoints: this.#byEndpoint.size, sessions, streams };
  }

  /** Sessions to one endpoint (for tests and /debug). */
  sessionsTo(up: Upstream): number {
    return this.#byEndpoint.get(up.id)?.length ?? 0;
  }

  close(): void {
    this.#closed = true;
    for (const list of this.#byEndpoint.values()) for (const e of list) e.session.destroy();
    this.#byEndpoint.clear();
  }

  /** A session with a free slot, reserved (active + 1) for the caller. */
  async #acquire(up: Upstream): Promise<Entry> {
    if (this.#closed) throw new H2OpenError('connect', 'the proxy is shutting down');
    const list = this.#byEndpoint.get(up.id) ?? [];
    for (const e of list) {
      if (e.draining) continue;
      await e.ready.catch(() => {});
      if (!e.draining && !e.session.destroyed && e.active < limitOf(e.session)) {
        e.active++;
        e.idle?.cancel();
        return e;
      }
    }
    const e = this.#open(up);
    e.active++;
    await e.ready;
    return e;
  }

  #open(up: Upstream): Entry {
    const authority = up.host.includes(':')
      ? `http://[${up.host}]:${up.port}`
      : `http://${up.host}:${up.port}`;
    const session = connect(authority, {
      settings: { initialWindowSize: STREAM_WINDOW, enablePush: false },
      maxSessionMemory: 64,
      // Without TCP_NODELAY small frames wait on Nagle and delayed ACKs (tens of milliseconds).
      createConnection: () => netConnect({ host: up.host, port: up.port, noDelay: true }),
    });
    const entry: Entry = { session, ready: Promise.resolve(), active: 0, draining: false };
    const list = this.#byEndpoint.get(up.id) ?? [];
    list.push(entry);
    this.#byEndpoint.set(up.id, list);
    entry.ready = new Promise<void>((resolve, reject) => {
      const timer = this.#o.clock.setTimer(this.#o.connectTimeoutMs, () => {
        session.destroy();
        reject(new H2OpenError('connect', `timed out after ${this.#o.connectTimeoutMs} ms`, true));
      });
      // The peer's SETTINGS (its stream limit) arrive first on a healthy connection.
      session.once('remoteSettings', () => {
        timer.cancel();
        try {
          session.setLocalWindowSize(SESSION_WINDOW);
        } catch {
          // The session was destroyed meanwhile; its streams will fail on their own.
        }
        resolve();
      });
      session.once('close', () => {
        timer.cancel();
        reject(new H2OpenError('connect', 'connection closed before its settings arrived'));
      });
      session.once('error', (e: NodeJS.ErrnoException) => {
        timer.cancel();
        reject(new H2OpenError('connect', e.code ?? e.message));
      });
    });
    entry.ready.catch(() => (entry.draining = true));
    session.on('error', () => {});
    session.on('goaway', () => {
      entry.draining = true;
    });
    session.once('close', () => {
      entry.draining = true;
      entry.idle?.cancel();
      this.#remove(up.id, entry);
    });
    void entry.ready.then(
      () => this.#ping(entry),
      () => {},
    );
    return entry;
  }

  #ping(entry: Entry): void {
    const { clock, pingIntervalMs, pingTimeoutMs } = this.#o;
    clock.setTimer(pingIntervalMs, () => {
      const s = entry.session;
      if (s.destroyed || s.closed) return;
      const deadline = clock.setTimer(pingTimeoutMs, () => s.destroy());
      const sent = s.ping((err) => {
        deadline.cancel();
        if (err) s.destroy();
        else this.#ping(entry);
      });
      if (!sent) {
        deadline.cancel();
        s.destroy();
      }
    });
  }

  #maybeIdle(up: Upstream, entry: Entry): void {
    if (entry.active > 0) return;
    if (entry.draining) {
      // Node closes a session after GOAWAY itself; one we retired is closed once empty.
      if (!entry.session.closed) entry.session.close();
      return;
    }
    entry.idle?.cancel();
    entry.idle = this.#o.clock.setTimer(this.#o.idleMs, () => {
      if (entry.active > 0) return;
      entry.draining = true;
      entry.session.close();
      this.#remove(up.id, entry);
    });
  }

  #remove(id: string, entry: Entry): void {
    const list = this.#byEndpoint.get(id);
    if (!list) return;
    const i = list.indexOf(entry);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.#byEndpoint.delete(id);
  }
}

function limitOf(session: ClientHttp2Session): number {
  // Before the peer's SETTINGS, RFC 9113 lets a client assume 100 (Node's peerMaxConcurrentStreams).
  return session.remoteSettings.maxConcurrentStreams ?? 100;
}
