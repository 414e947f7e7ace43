import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Http2Session } from 'node:http2';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { Clock } from '../shared/clock.ts';
import { listenOn } from '../shared/listen.ts';
import type { Logger } from '../shared/log.ts';
import type { EgressHandler } from './egress.ts';
import { streamServer, type H2StreamHandler, type StreamServer } from './h2/stream-server.ts';
import type { IngressHandler } from './ingress.ts';
import { createLimitedServer, type ServerLimits, type StreamHandlers } from './server.ts';
import { detect, type Reclaim } from './sniff.ts';

/**
 * The egress and ingress listeners and their lifecycle. Under transparent capture each listener
 * first looks at the client's first bytes: HTTP/1 goes to the HTTP server, anything else (or a
 * client that stays silent, as in server-speaks-first protocols) is an opaque TCP stream.
 *
 * Shutdown (docs/data-path.md, Lifecycle): drain() stops ingress at once
 * (no new connections; in-flight requests finish, their connections close), while egress keeps
 * serving until the app has gone or the grace period ends, then closes.
 */
export interface ListenerSpec {
  host: string;
  port: number;
}

/** The streams of a listener's prior-knowledge HTTP/2 (h2c) connections. */
export type { H2StreamHandler };

export interface SidecarOptions {
  /** extraHosts: the same egress port on further addresses (::1 for ip6tables REDIRECT). */
  egress: ListenerSpec & { handler: EgressHandler; extraHosts?: string[]; h2?: H2StreamHandler };
  ingress: ListenerSpec & { handler: IngressHandler; h2?: H2StreamHandler };
  limits: ServerLimits;
  /** Sniff for non-HTTP streams (transparent capture). */
  sniff: boolean;
  /** Under sniffing, how long a silent client is waited for before it is treated as TCP. */
  detectTimeoutMs: number;
  /** The original destination of a captured egress stream (transparent capture). */
  originalDestination?: (socket: Socket) => { address: string; port: number } | undefined;
  log: Logger;
  clock: Clock;
  /** A request rejected by the listener limits (400/408/431) before routing. */
  onRejected?: (listener: 'egress' | 'ingress', code: string, status: number) => void;
}

interface Listener {
  http: Server;
  /** Prior-knowledge h2c connections, told apart by their preface. */
  h2?: StreamServer;
  sessions: Set<Http2Session>;
  front: NetServer | Server;
  /** Further addresses of the same listener (egress on [::1] under transparent capture). */
  extra: NetServer[];
  /** Handles a connection accepted on any of the listener's addresses. */
  accept: (socket: Socket) => void;
  sockets: Set<Socket>;
  inflight: number;
}

export class Sidecar {
  readonly #o: SidecarOptions;
  readonly #egress: Listener;
  readonly #ingress: Listener;
  #draining = false;

  constructor(o: SidecarOptions) {
    this.#o = o;
    const e = o.egress.handler;
    this.#egress = this.#listener(
      'egress',
      e.onRequest,
      (s) => this.#egressTcp(s),
      { upgrade: e.onUpgrade, connect: e.onConnect },
      o.egress.h2,
    );
    this.#ingress = this.#listener(
      'ingress',
      (req, res) => {
        if (this.#draining) res.setHeader('connection', 'close');
        o.ingress.handler.onRequest(req, res);
      },
      (s, reclaim) => o.ingress.handler.onTcp(s, reclaim),
      { upgrade: o.ingress.handler.onUpgrade },
      o.ingress.h2,
    );
  }

  async start(): Promise<void> {
    await listen(this.#egress.front, this.#o.egress);
    await listen(this.#ingress.front, this.#o.ingress);
    const port = this.ports().egress;
    for (const host of this.#o.egress.extraHosts ?? []) {
      const server = createNetServer({ noDelay: true }, this.#egress.accept);
      try {
        await listen(server, { host, port });
        this.#egress.extra.push(server);
      } catch (e) {
        // A pod without IPv6 has no ::1; IPv4 capture works without it.
        this.#o.log.warn('egress listener address unavailable', { host, port, error: (e as Error).message });
      }
    }
  }

  /** Bound addresses (port 0 in tests picks a free port). */
  ports(): { egress: number; ingress: number } {
    return { egress: portOf(this.#egress.front), ingress: portOf(this.#ingress.front) };
  }

  get draining(): boolean {
    return this.#draining;
  }

  connections(): {
    egress: number;
    ingress: number;
    egressInflight: number;
    ingressInflight: number;
    h2Sessions: number;
  } {
    return {
      egress: this.#egress.sockets.size,
      ingress: this.#ingress.sockets.size,
      egressInflight: this.#egress.inflight,
      ingressInflight: this.#ingress.inflight,
      h2Sessions: this.#egress.sessions.size + this.#ingress.sessions.size,
    };
  }

  /**
   * Stops ingress and drains it, keeps egress until appGone() says the app has exited (polled) or
   * graceMs passes, then closes everything.
   */
  async drain(graceMs: number, appGone: () => Promise<boolean>): Promise<void> {
    this.#draining = true;
    const deadline = this.#o.clock.now() + graceMs;
    this.#o.log.info('draining: ingress closed, egress kept until the app exits', { graceMs });
    const ingressClosed = closeListener(this.#ingress);
    while (this.#o.clock.now() < deadline) {
      if (this.#ingress.inflight === 0 && this.#egress.inflight === 0 && (await appGone())) break;
      await this.#o.clock.sleep(Math.min(200, Math.max(1, deadline - this.#o.clock.now())));
    }
    await Promise.race([
      Promise.all([ingressClosed, closeListener(this.#egress)]),
      this.#o.clock.sleep(Math.max(0, deadline - this.#o.clock.now())),
    ]);
    this.close();
  }

  /** Closes both listeners and every connection at once. */
  close(): void {
    for (const l of [this.#egress, this.#ingress]) {
      for (const x of l.extra) x.close();
      l.front.close();
      if (l.front !== l.http) l.http.close();
      l.h2?.server.close();
      for (const s of l.sessions) s.destroy();
      for (const s of l.sockets) s.destroy();
    }
  }

  #listener(
    name: 'egress' | 'ingress',
    onRequest: (req: IncomingMessage, res: ServerResponse) => void,
    onTcp: (s: Socket, reclaim?: Reclaim) => void,
    streams: StreamHandlers,
    h2?: H2StreamHandler,
  ): Listener {
    const l: Listener = {
      http: createLimitedServer(
        this.#o.limits,
        (req, res) => {
          l.inflight++;
          res.once('close', () => l.inflight--);
          onRequest(req, res);
        },
        this.#o.log,
        (code, status) => this.#o.onRejected?.(name, code, status),
        streams,
        this.#o.clock,
      ),
      sessions: new Set(),
      front: undefined as unknown as NetServer,
      extra: [],
      accept: () => {},
      sockets: new Set(),
      inflight: 0,
    };
    const track = (s: Socket): void => {
      l.sockets.add(s);
      s.once('close', () => l.sockets.delete(s));
    };
    if (h2) l.h2 = this.#h2Server(name, l, h2);
    if (!this.#o.sniff && !l.h2) {
      l.http.on('connection', track);
      l.front = l.http;
      l.accept = (socket) => l.http.emit('connection', socket);
      return l;
    }
    // The HTTP server never listens itself, and Node starts its periodic connection checks (the
    // headers timeout that cuts off slowloris clients, the request timeout) on 'listening' only.
    l.http.emit('listening');
    // Without transparent capture every connection is HTTP, of one version or the other.
    const other = this.#o.sniff
      ? onTcp
      : (s: Socket): void => {
          l.http.emit('connection', s);
          s.resume();
        };
    l.accept = (socket) => {
      track(socket);
      this.#sniff(socket, l, other);
    };
    l.front = createNetServer({ noDelay: true }, l.accept);
    return l;
  }

  /**
   * Serves an already accepted egress connection (a CONNECT tunnel) as prior-knowledge h2c;
   * head holds bytes read past the CONNECT request. Resolves when the connection has closed.
   */
  adoptEgressH2(socket: Socket, head: Buffer): Promise<void> {
    const h2 = this.#egress.h2;
    if (!h2) {
      socket.destroy();
      return Promise.resolve();
    }
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // The HTTP server's timeouts no longer apply; an HTTP/2 client keeps its connection alive itself.
    socket.setTimeout(0);
    h2.serve(socket, head);
    return closed;
  }

  #h2Server(name: 'egress' | 'ingress', l: Listener, onStream: H2StreamHandler): StreamServer {
    return streamServer(
      (stream, headers, socket) => {
        l.inflight++;
        stream.once('close', () => l.inflight--);
        onStream(stream, headers, socket);
      },
      {
        limits: this.#o.limits,
        clock: this.#o.clock,
        onSession: (session) => {
          l.sessions.add(session);
          session.once('close', () => l.sessions.delete(session));
          if (this.#draining && l === this.#ingress) session.close();
        },
        onRejected: (code, status) => this.#o.onRejected?.(name, code, status),
      },
    );
  }

  #sniff(socket: Socket, l: Listener, onTcp: (s: Socket, reclaim?: Reclaim) => void): void {
    socket.on('error', () => socket.destroy());
    detect(socket, this.#o.clock, this.#o.detectTimeoutMs, {
      http: l.http,
      ...(l.h2 ? { h2: l.h2 } : {}),
      tcp: onTcp,
    });
  }

  #egressTcp(socket: Socket): void {
    const original = this.#o.originalDestination?.(socket);
    if (!original) {
      socket.destroy();
      return;
    }
    this.#o.egress.handler.onTcp(socket, original);
  }
}

function listen(server: NetServer | Server, spec: ListenerSpec): Promise<void> {
  return listenOn(server, spec.port, spec.host);
}

function portOf(server: NetServer | Server): number {
  const a = server.address();
  return typeof a === 'object' && a ? a.port : 0;
}

function closeListener(l: Listener): Promise<void> {
  for (const x of l.extra) x.close();
  // GOAWAY: streams in flight finish, new ones go to another connection.
  for (const s of l.sessions) s.close();
  return new Promise((resolve) => {
    l.front.close(() => resolve());
    if (l.front !== l.http) l.http.close();
    l.http.closeIdleConnections();
  });
}
