import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Http2Session } from 'node:http2';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { createServer as createTlsServer, type Server as TlsServer, type TLSSocket } from 'node:tls';
import type { Clock } from '../shared/clock.ts';
import { listenOn } from '../shared/listen.ts';
import type { Logger } from '../shared/log.ts';
import { streamServer, type H2StreamHandler, type StreamServer } from '../proxy/h2/stream-server.ts';
import { createLimitedServer, type OnRejected, type ServerLimits } from '../proxy/server.ts';
import { h2PrefaceOrNot } from '../proxy/sniff.ts';
import type { Certificates } from './certs.ts';

/**
 * The gateway's HTTP and HTTPS listeners. HTTP/1.1 connections feed ONE limited http.Server (the
 * sidecar's limits: strict parser, header size and count, slowloris timeouts) and HTTP/2 ones ONE
 * stream server with the same limits, so a request is handled the same way whichever way it came.
 * A plaintext connection is HTTP/2 when it opens with the prior-knowledge preface (h2c, RFC 9113
 * section 3.3), HTTP/1.1 otherwise; TLS is terminated in front with the certificate chosen by SNI
 * and offers h2 and http/1.1 by ALPN (RFC 7301), the client's choice deciding.
 */
export interface GatewayHandler {
  onRequest: (req: IncomingMessage, res: ServerResponse) => void;
  onUpgrade: (req: IncomingMessage, socket: Socket, head: Buffer) => void;
  onStream: H2StreamHandler;
}

/**
 * How long a plaintext connection that has sent nothing is waited for before it is handed to the
 * HTTP/1.1 server (whose own timeouts then apply): an HTTP client always speaks first.
 */
const PREFACE_WAIT_MS = 1_000;
const NOTHING = Buffer.alloc(0);

export interface ListenersOptions {
  http: { host: string; port: number };
  /** Off when unset. */
  https?: { host: string; port: number };
  limits: ServerLimits;
  handler: GatewayHandler;
  certs: Certificates;
  log: Logger;
  clock: Clock;
  /** A TLS handshake that has not finished after this is dropped. */
  handshakeTimeoutMs?: number;
  onRejected?: OnRejected;
}

export class GatewayListeners {
  readonly #o: ListenersOptions;
  readonly #http: Server;
  readonly #h2: StreamServer;
  /** The plaintext port: tells h2c from HTTP/1.1, then hands the connection over. */
  readonly #plain: NetServer;
  readonly #tls: TlsServer | undefined;
  readonly #sockets = new Set<Socket>();
  readonly #sessions = new Set<Http2Session>();
  #inflight = 0;
  #draining = false;
  #defaultCert: string | undefined;

  constructor(o: ListenersOptions) {
    this.#o = o;
    this.#http = createLimitedServer(
      o.limits,
      (req, res) => {
        this.#inflight++;
        res.once('close', () => this.#inflight--);
        if (this.#draining) res.setHeader('connection', 'close');
        o.handler.onRequest(req, res);
      },
      o.log,
      o.onRejected,
      { upgrade: o.handler.onUpgrade },
      o.clock,
    );
    this.#http.on('connection', (s: Socket) => this.#track(s));
    // The HTTP server never listens itself, and Node starts its periodic checks (the headers
    // timeout that cuts off slowloris clients) on 'listening' only.
    this.#http.emit('listening');
    this.#h2 = streamServer(
      (stream, headers, socket) => {
        this.#inflight++;
        stream.once('close', () => this.#inflight--);
        o.handler.onStream(stream, headers, socket);
      },
      {
        limits: o.limits,
        clock: o.clock,
        onSession: (session) => {
          this.#sessions.add(session);
          session.once('close', () => this.#sessions.delete(session));
          // GOAWAY at once: streams go to another replica, none is lost.
          if (this.#draining) session.close();
        },
        ...(o.onRejected ? { onRejected: o.onRejected } : {}),
      },
    );
    this.#plain = createNetServer({ noDelay: true }, (s) => this.#acceptPlain(s));
    if (o.https) {
      this.#tls = createTlsServer(
        {
          SNICallback: o.certs.sniCallback,
          ALPNProtocols: ['h2', 'http/1.1'],
          handshakeTimeout: o.handshakeTimeoutMs ?? 10_000,
        },
        (socket: TLSSocket) => {
          if (socket.alpnProtocol === 'h2') this.#h2.serve(socket);
          else this.#http.emit('connection', socket);
        },
      );
      this.#tls.on('connection', (s: Socket) => this.#track(s));
      // A failed handshake (no certificate, a scanner, a client that gave up) is the client's problem.
      this.#tls.on('tlsClientError', (_err, socket) => socket.destroy());
      this.refreshDefaultCertificate();
    }
  }

  /** Clients without SNI get the server's own context: keep it on the current default certificate. */
  refreshDefaultCertificate(): void {
    const pem = this.#o.certs.defaultPem();
    const id = pem && pem.cert + pem.key;
    if (!this.#tls || !pem || id === this.#defaultCert) return;
    this.#tls.setSecureContext({ cert: pem.cert, key: pem.key });
    this.#defaultCert = id;
  }

  /**
   * Connections accepted elsewhere (a Gateway's own pod port), served as if they came to the HTTP
   * port or, for https, to the HTTPS port (undefined without one).
   */
  accept(): { http: (s: Socket) => void; https?: (s: Socket) => void } {
    const tls = this.#tls;
    return {
      http: (s) => this.#acceptPlain(s),
      ...(tls ? { https: (s: Socket) => tls.emit('connection', s) } : {}),
    };
  }

  async start(): Promise<void> {
    await listenOn(this.#plain, this.#o.http.port, this.#o.http.host);
    if (this.#tls && this.#o.https) await listenOn(this.#tls, this.#o.https.port, this.#o.https.host);
  }

  ports(): { http: number; https: number | undefined } {
    const port = (s: NetServer | TlsServer | undefined): number | undefined => {
      const a = s?.address();
      return a && typeof a === 'object' ? a.port : undefined;
    };
    return { http: port(this.#plain) ?? 0, https: port(this.#tls) };
  }

  get inflight(): number {
    return this.#inflight;
  }

  /**
   * Stops accepting, lets in-flight requests finish (their connections close after the response;
   * HTTP/2 connections get GOAWAY) for at most graceMs, then closes everything.
   */
  async drain(graceMs: number): Promise<void> {
    this.#draining = true;
    this.#plain.close();
    this.#tls?.close();
    this.#http.closeIdleConnections();
    for (const s of this.#sessions) s.close();
    const deadline = this.#o.clock.now() + graceMs;
    while (this.#inflight > 0 && this.#o.clock.now() < deadline)
      await this.#o.clock.sleep(Math.min(100, deadline - this.#o.clock.now()));
    this.close();
  }

  close(): void {
    this.#plain.close();
    this.#http.close();
    this.#tls?.close();
    this.#h2.server.close();
    for (const s of this.#sessions) s.destroy();
    for (const s of this.#sockets) s.destroy();
  }

  /** A plaintext connection: HTTP/2 when it opens with the preface, HTTP/1.1 otherwise. */
  #acceptPlain(s: Socket): void {
    this.#track(s);
    s.on('error', () => s.destroy());
    void h2PrefaceOrNot(s, NOTHING, this.#o.clock, PREFACE_WAIT_MS).then(({ kind, head }) => {
      if (kind === 'closed' || s.destroyed) return;
      if (kind === 'h2') return this.#h2.serve(s, head);
      if (head.length > 0) s.unshift(head);
      this.#http.emit('connection', s);
      s.resume();
    });
  }

  #track(s: Socket): void {
    if (this.#sockets.has(s)) return;
    this.#sockets.add(s);
    s.once('close', () => this.#sockets.delete(s));
  }
}
