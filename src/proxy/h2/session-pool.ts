import {
  connect,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type ClientSessionRequestOptions,
  type OutgoingHttpHeaders,
} from 'node:http2';
import type { Socket } from 'node:net';
import type { Clock, Timer } from '../../shared/clock.ts';
import { tcpDialer, type Dial, type DialCallback } from '../dial.ts';
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
  /**
   * Opens the connection a session runs on (mutual TLS to a meshed endpoint); by default plain
   * TCP (h2c with prior knowledge).
   */
  dial?: Dial;
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
  /** Set once its connection is up (dialling a meshed endpoint takes a TLS handshake first). */
  session?: ClientHttp2Session;
  /** ready has resolved: streams may be opened on the session without waiting. */
  settled?: boolean;
  /** The peer's SETTINGS arrived (its stream limit); rejects with H2OpenError. */
  ready: Promise<ClientHttp2Session>;
  active: number;
  /** GOAWAY received, or closing: finishes its streams, takes no new one. */
  draining: boolean;
  idle?: Timer;
  /** Why the dial failed before a session existed (a destroyed socket, a timeout). */
  abort?: (e: H2OpenError) => void;
  /** The namespace the dial checked the server for: only streams of that namespace use it. */
  namespace: string | undefined;
  /** What discovery said of the endpoint's mesh listener when it was dialled (see Dial). */
  meshed: boolean | undefined;
}

export class H2SessionPool {
  readonly #o: Required<Omit<H2PoolOptions, 'dial'>>;
  readonly #dial: Dial;
  readonly #byEndpoint = new Map<string, Entry[]>();
  #closed = false;

  constructor(o: H2PoolOptions) {
    this.#o = { pingIntervalMs: 30_000, pingTimeoutMs: 10_000, idleMs: 300_000, ...o };
    this.#dial = o.dial ?? tcpDialer(o.clock, o.connectTimeoutMs);
  }

  /**
   * Opens a stream to up: at once when a ready session has room (no promise per stream), else
   * once a session is. Fails (throws, or rejects) with H2OpenError when the endpoint cannot be
   * reached or refuses the stream before it is sent; the caller may then try another endpoint.
   * Headers Node refuses fail with Node's own error.
   */
  request(
    up: Upstream,
    headers: OutgoingHttpHeaders,
    options: ClientSessionRequestOptions,
  ): ClientHttp2Stream | Promise<ClientHttp2Stream> {
    const entry = this.#readyEntry(up);
    if (entry) {
      reserve(entry);
      const stream = this.#stream(up, entry, entry.session!, headers, options);
      if (stream) return stream;
    }
    return this.#requestLater(up, headers, options);
  }

  async #requestLater(
    up: Upstream,
    headers: OutgoingHttpHeaders,
    options: ClientSessionRequestOptions,
  ): Promise<ClientHttp2Stream> {
    // Bounded: each turn either returns or retires a session that could not take the stream.
    for (let turn = 0; turn < 8; turn++) {
      const { entry, session } = await this.#acquire(up);
      const stream = this.#stream(up, entry, session, headers, options);
      if (stream) return stream;
    }
    throw new H2OpenError('refused', 'no session could take the stream');
  }

  /** A stream on a session reserved for it; undefined when the session turned out to be gone. */
  #stream(
    up: Upstream,
    entry: Entry,
    session: ClientHttp2Session,
    headers: OutgoingHttpHeaders,
    options: ClientSessionRequestOptions,
  ): ClientHttp2Stream | undefined {
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(headers, options);
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
      return undefined;
    }
    stream.on('close', () => {
      entry.active--;
      this.#maybeIdle(up, entry);
    });
    return stream;
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
    for (const list of this.#byEndpoint.values())
      for (const e of list) {
        e.session?.destroy();
        e.abort?.(new H2OpenError('connect', 'the proxy is shutting down'));
      }
    this.#byEndpoint.clear();
  }

  /** A session already set up with a free slot, if any (not reserved). */
  #readyEntry(up: Upstream): Entry | undefined {
    if (this.#closed) return undefined;
    for (const entry of this.#byEndpoint.get(up.id) ?? [])
      if (entry.settled && usable(entry, up) && entry.active < limitOf(entry.session!)) return entry;
    return undefined;
  }

  /** A session with a free slot, reserved (active + 1) for the caller. */
  async #acquire(up: Upstream): Promise<{ entry: Entry; session: ClientHttp2Session }> {
    if (this.#closed) throw new H2OpenError('connect', 'the proxy is shutting down');
    const list = this.#byEndpoint.get(up.id) ?? [];
    for (const entry of list) {
      if (!usable(entry, up)) continue;
      const session = await entry.ready.catch(() => undefined);
      if (session && usable(entry, up) && entry.active < limitOf(session)) {
        reserve(entry);
        return { entry, session };
      }
    }
    const entry = this.#open(up);
    entry.active++;
    try {
      return { entry, session: await entry.ready };
    } catch (e) {
      entry.active--;
      throw e;
    }
  }

  #open(up: Upstream): Entry {
    const pending: Omit<Entry, 'ready'> = {
      active: 0,
      draining: false,
      namespace: up.namespace,
      meshed: up.meshed,
    };
    const entry: Entry = Object.assign(pending, { ready: this.#connect(up, pending) });
    const list = this.#byEndpoint.get(up.id) ?? [];
    list.push(entry);
    this.#byEndpoint.set(up.id, list);
    entry.ready.then(
      () => {
        entry.settled = true;
        this.#ping(entry);
      },
      () => {
        entry.draining = true;
        this.#remove(up.id, entry);
      },
    );
    return entry;
  }

  /** Dials, then waits for the peer's SETTINGS (its stream limit), within one connect timeout. */
  #connect(up: Upstream, entry: Omit<Entry, 'ready'>): Promise<ClientHttp2Session> {
    return new Promise<ClientHttp2Session>((resolve, reject) => {
      let failed = false;
      const fail = (e: H2OpenError): void => {
        if (failed) return;
        failed = true;
        timer.cancel();
        entry.session?.destroy();
        reject(e);
      };
      entry.abort = fail;
      const timer = this.#o.clock.setTimer(this.#o.connectTimeoutMs, () =>
        fail(new H2OpenError('connect', `timed out after ${this.#o.connectTimeoutMs} ms`, true)),
      );
      const dial = (cb: DialCallback): void => this.#dial(up.host, up.port, cb, up.namespace, up.meshed);
      dial((err, socket) => {
        if (failed || this.#closed || err || !socket) {
          socket?.destroy();
          const code = err?.code;
          return fail(new H2OpenError('connect', code ?? err?.message ?? 'closed', code === 'ETIMEDOUT'));
        }
        entry.abort = undefined;
        const session = this.#session(up, entry, socket);
        // The peer's SETTINGS (its stream limit) arrive first on a healthy connection.
        session.once('remoteSettings', () => {
          timer.cancel();
          try {
            session.setLocalWindowSize(SESSION_WINDOW);
          } catch {
            // The session was destroyed meanwhile; its streams will fail on their own.
          }
          resolve(session);
        });
        session.once('close', () =>
          fail(new H2OpenError('connect', 'connection closed before its settings arrived')),
        );
        session.once('error', (e: NodeJS.ErrnoException) =>
          fail(new H2OpenError('connect', e.code ?? e.message)),
        );
      });
    });
  }

  /** An HTTP/2 session on an open connection, tracked until it closes. */
  #session(up: Upstream, entry: Omit<Entry, 'ready'>, socket: Socket): ClientHttp2Session {
    const authority = up.host.includes(':')
      ? `http://[${up.host}]:${up.port}`
      : `http://${up.host}:${up.port}`;
    const session = connect(authority, {
      settings: { initialWindowSize: STREAM_WINDOW, enablePush: false },
      maxSessionMemory: 64,
      createConnection: () => socket,
    });
    entry.session = session;
    session.on('error', () => {});
    session.on('goaway', () => {
      entry.draining = true;
    });
    session.once('close', () => {
      entry.draining = true;
      entry.idle?.cancel();
      this.#remove(up.id, entry);
    });
    return session;
  }

  #ping(entry: Entry): void {
    const { clock, pingIntervalMs, pingTimeoutMs } = this.#o;
    clock.setTimer(pingIntervalMs, () => {
      const s = entry.session;
      if (!s || s.destroyed || s.closed) return;
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
    const session = entry.session;
    if (entry.active > 0 || !session) return;
    if (entry.draining) {
      // Node closes a session after GOAWAY itself; one we retired is closed once empty.
      if (!session.closed) session.close();
      return;
    }
    entry.idle?.cancel();
    entry.idle = this.#o.clock.setTimer(this.#o.idleMs, () => {
      if (entry.active > 0) return;
      entry.draining = true;
      session.close();
      this.#remove(up.id, entry);
    });
  }

  #remove(id: string, entry: Omit<Entry, 'ready'>): void {
    const list = this.#byEndpoint.get(id);
    if (!list) return;
    const i = list.findIndex((e) => e === entry);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.#byEndpoint.delete(id);
  }
}

/** Whether a session may take up's streams: not draining, dialled for up's namespace and mesh. */
function usable(entry: Entry, up: Upstream): boolean {
  return (
    !entry.draining &&
    !entry.session?.destroyed &&
    entry.namespace === up.namespace &&
    entry.meshed === up.meshed
  );
}

/** Takes one of a session's stream slots for a caller about to open a stream. */
function reserve(entry: Entry): void {
  entry.active++;
  entry.idle?.cancel();
}

function limitOf(session: ClientHttp2Session): number {
  // Before the peer's SETTINGS, RFC 9113 lets a client assume 100 (Node's peerMaxConcurrentStreams).
  return session.remoteSettings.maxConcurrentStreams ?? 100;
}
