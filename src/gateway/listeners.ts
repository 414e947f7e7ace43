import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { createServer as createTlsServer, type Server as TlsServer, type TLSSocket } from 'node:tls';
import type { Clock } from '../shared/clock.ts';
import { listenOn } from '../shared/listen.ts';
import type { Logger } from '../shared/log.ts';
import { createLimitedServer, type OnRejected, type ServerLimits } from '../proxy/server.ts';
import type { Certificates } from './certs.ts';

/**
 * The gateway's HTTP and HTTPS listeners. Both feed ONE limited http.Server (the sidecar's limits:
 * strict parser, header size and count, slowloris timeouts), so a request is handled the same way
 * whichever way it came; TLS is terminated in front of it with the certificate chosen by SNI.
 */
export interface GatewayHandler {
  onRequest: (req: IncomingMessage, res: ServerResponse) => void;
  onUpgrade: (req: IncomingMessage, socket: Socket, head: Buffer) => void;
}

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
  readonly #tls: TlsServer | undefined;
  readonly #sockets = new Set<Socket>();
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
    if (o.https) {
      this.#tls = createTlsServer(
        {
          SNICallback: o.certs.sniCallback,
          ALPNProtocols: ['http/1.1'],
          handshakeTimeout: o.handshakeTimeoutMs ?? 10_000,
        },
        (socket: TLSSocket) => this.#http.emit('connection', socket),
      );
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
      http: (s) => this.#http.emit('connection', s),
      ...(tls ? { https: (s: Socket) => tls.emit('connection', s) } : {}),
    };
  }

  async start(): Promise<void> {
    await listenOn(this.#http, this.#o.http.port, this.#o.http.host);
    if (this.#tls && this.#o.https) await listenOn(this.#tls, this.#o.https.port, this.#o.https.host);
  }

  ports(): { http: number; https: number | undefined } {
    const port = (s: Server | TlsServer | undefined): number | undefined => {
      const a = s?.address();
      return a && typeof a === 'object' ? a.port : undefined;
    };
    return { http: port(this.#http) ?? 0, https: port(this.#tls) };
  }

  get inflight(): number {
    return this.#inflight;
  }

  /**
   * Stops accepting, lets in-flight requests finish (their connections close after the response)
   * for at most graceMs, then closes everything.
   */
  async drain(graceMs: number): Promise<void> {
    this.#draining = true;
    this.#http.close();
    this.#tls?.close();
    this.#http.closeIdleConnections();
    const deadline = this.#o.clock.now() + graceMs;
    while (this.#inflight > 0 && this.#o.clock.now() < deadline)
      await this.#o.clock.sleep(Math.min(100, deadline - this.#o.clock.now()));
    this.close();
  }

  close(): void {
    this.#http.close();
    this.#tls?.close();
    for (const s of this.#sockets) s.destroy();
  }

  #track(s: Socket): void {
    this.#sockets.add(s);
    s.once('close', () => this.#sockets.delete(s));
  }
}
