import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { Clock } from '../shared/clock.ts';
import { listenOn } from '../shared/listen.ts';
import type { Logger } from '../shared/log.ts';
import type { EgressHandler } from './egress.ts';
import type { IngressHandler } from './ingress.ts';
import { createLimitedServer, type ServerLimits, type StreamHandlers } from './server.ts';

/**
 * The egress and ingress listeners and their lifecycle. Under transparent capture each listener
 * first looks at the client's first bytes: HTTP/1 goes to the HTTP server, anything else (or a
 * client that stays silent, as in server-speaks-first protocols) is an opaque TCP stream.
 *
 * Shutdown (DESIGN.md section 6, reference/security.md section 6): drain() stops ingress at once
 * (no new connections; in-flight requests finish, their connections close), while egress keeps
 * serving until the app has gone or the grace period ends, then closes.
 */
export interface ListenerSpec {
  host: string;
  port: number;
}

export interface SidecarOptions {
  /** extraHosts: the same egress port on further addresses (::1 for ip6tables REDIRECT). */
  egress: ListenerSpec & { handler: EgressHandler; extraHosts?: string[] };
  ingress: ListenerSpec & { handler: IngressHandler };
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
  front: NetServer | Server;
  /** Further addresses of the same listener (egress on [::1] under transparent capture). */
  extra: NetServer[];
  /** Handles a connection accepted on any of the listener's addresses. */
  accept: (socket: Socket) => void;
  sockets: Set<Socket>;
  inflight: number;
}

/** The longest prefix looked at; an HTTP request line longer than this goes to the parser (431). */
const SNIFF_LIMIT = 16 * 1024;
const REQUEST_LINE = /^[A-Z]{3,12} [^\s]+ HTTP\/1\.[01]\r?$/;
const METHOD_PREFIX = /^[A-Z]{1,12}( |$)/;

/**
 * HTTP/1 or not, from a connection's first bytes: a complete first line must be a request line
 * ending in HTTP/1.x, so text protocols such as Redis inline commands (`PING 42`) or SMTP are not
 * mistaken for HTTP. 'more' asks for more bytes; final (detect timeout or limit) forces an answer.
 */
export function classify(buf: Buffer, final: boolean): 'http' | 'tcp' | 'more' {
  const text = buf.subarray(0, SNIFF_LIMIT).toString('latin1');
  if (text.length === 0) return final ? 'tcp' : 'more';
  const eol = text.indexOf('\n');
  if (eol >= 0) return REQUEST_LINE.test(text.slice(0, eol)) ? 'http' : 'tcp';
  if (!METHOD_PREFIX.test(text.slice(0, 13))) return 'tcp';
  if (final || buf.length >= SNIFF_LIMIT) return /^[A-Z]{3,12} /.test(text) ? 'http' : 'tcp';
  return 'more';
}

export class Sidecar {
  readonly #o: SidecarOptions;
  readonly #egress: Listener;
  readonly #ingress: Listener;
  #draining = false;

  constructor(o: SidecarOptions) {
    this.#o = o;
    const e = o.egress.handler;
    this.#egress = this.#listener('egress', e.onRequest, (s) => this.#egressTcp(s), {
      upgrade: e.onUpgrade,
      connect: e.onConnect,
    });
    this.#ingress = this.#listener(
      'ingress',
      (req, res) => {
        if (this.#draining) res.setHeader('connection', 'close');
        o.ingress.handler.onRequest(req, res);
      },
      (s) => o.ingress.handler.onTcp(s),
      { upgrade: o.ingress.handler.onUpgrade },
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

  connections(): { egress: number; ingress: number; egressInflight: number; ingressInflight: number } {
    return {
      egress: this.#egress.sockets.size,
      ingress: this.#ingress.sockets.size,
      egressInflight: this.#egress.inflight,
      ingressInflight: this.#ingress.inflight,
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
      for (const s of l.sockets) s.destroy();
    }
  }

  #listener(
    name: 'egress' | 'ingress',
    onRequest: (req: IncomingMessage, res: ServerResponse) => void,
    onTcp: (s: Socket) => void,
    streams: StreamHandlers,
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
    if (!this.#o.sniff) {
      l.http.on('connection', track);
      l.front = l.http;
      l.accept = (socket) => l.http.emit('connection', socket);
      return l;
    }
    l.accept = (socket) => {
      track(socket);
      this.#sniff(socket, l.http, onTcp);
    };
    l.front = createNetServer({ noDelay: true }, l.accept);
    return l;
  }

  #sniff(socket: Socket, http: Server, onTcp: (s: Socket) => void): void {
    socket.on('error', () => socket.destroy());
    const chunks: Buffer[] = [];
    let decided = false;
    const decide = (kind: 'http' | 'tcp'): void => {
      if (decided) return;
      decided = true;
      timer.cancel();
      socket.off('data', onData);
      socket.pause();
      if (chunks.length > 0) socket.unshift(Buffer.concat(chunks));
      if (kind === 'http') {
        http.emit('connection', socket);
        socket.resume();
      } else {
        // Stays paused until the tunnel pipes it, so no byte is lost while the route is decided.
        onTcp(socket);
      }
    };
    const timer = this.#o.clock.setTimer(this.#o.detectTimeoutMs, () => {
      const c = classify(Buffer.concat(chunks), true);
      decide(c === 'more' ? 'tcp' : c);
    });
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      const c = classify(Buffer.concat(chunks), false);
      if (c !== 'more') decide(c);
    };
    socket.on('data', onData);
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
  return new Promise((resolve) => {
    l.front.close(() => resolve());
    if (l.front !== l.http) l.http.close();
    l.http.closeIdleConnections();
  });
}
