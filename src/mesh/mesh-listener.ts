import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { Http2Session } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { createServer, type TLSSocket, type Server as TlsServer } from 'node:tls';
import type { AllowRule } from '../config/parse.ts';
import { answerError } from '../proxy/h2/forward.ts';
import { isGrpc } from '../proxy/h2/grpc.ts';
import { createLimitedServer, type ServerLimits } from '../proxy/server.ts';
import { streamServer, type H2StreamHandler, type StreamServer } from '../proxy/h2/stream-server.ts';
import { tcpUnlessHttp, type Reclaim } from '../proxy/sniff.ts';
import { sendError } from '../proxy/status.ts';
import type { Clock, Timer } from '../shared/clock.ts';
import { listenOn } from '../shared/listen.ts';
import type { Logger } from '../shared/log.ts';
import { allows } from './allow-from.ts';
import { MESH_ALPN, peerCertificateCurrent, peerSpiffeId, portFromSni, type MeshTls } from './mesh-tls.ts';
import { formatSpiffeId, type SpiffeId } from './spiffe.ts';

/** What the mesh listener learned about a connection in its handshake. */
interface MeshPeer {
  caller: SpiffeId;
  appPort: number;
}

const peers = new WeakMap<Socket, MeshPeer>();

/** The app port a meshed connection asked for (the ingress handler's destination seam). */
export const meshDestination =
  (appHost: string) =>
  (socket: Socket): { address: string; port: number } | undefined => {
    const p = peers.get(socket);
    return p ? { address: appHost, port: p.appPort } : undefined;
  };

/** What a meshed connection is handed to, by its ALPN protocol. */
export interface MeshHandlers {
  /** HTTP/1.1: the ingress handler that forwards to the app (destination: meshDestination). */
  onRequest: (req: IncomingMessage, res: ServerResponse) => void;
  /** h2: each stream, to the app over h2c. */
  onStream?: H2StreamHandler;
  /** outrigger-tcp: the decrypted byte stream, to the app port (see Detected.tcp for reclaim). */
  onTcp?: (socket: Socket, reclaim?: Reclaim) => void;
}

export interface MeshListenerOptions {
  host: string;
  port: number;
  tls: MeshTls;
  allowFrom: () => readonly AllowRule[];
  handlers: MeshHandlers;
  /** The sidecar's own ports: never a target. */
  ownPorts: ReadonlySet<number>;
  limits: ServerLimits;
  clock: Clock;
  log: Logger;
  /** How long a TLS session ticket this listener issues can be resumed (seconds). */
  ticketLifetimeSeconds?: number;
}

export interface MeshListenerStats {
  accepted: number;
  /** Accepted connections that resumed a TLS session. */
  resumed: number;
  denied: number;
  handshakeFailures: number;
  /** Accepted connections by ALPN protocol. */
  protocols: Record<string, number>;
}

/** Rotated on every certificate or trust-bundle change, and at least this often. */
const TICKET_LIFETIME_SECONDS = 3_600;

/**
 * The mesh listener (Linkerd's inbound port): mutual TLS only, the caller's certificate verified
 * against the trust bundle and required to carry one SPIFFE id of our trust domain; the app port
 * from SNI, the protocol from ALPN (HTTP/1.1, h2, or a TCP stream). HTTP goes through the ingress
 * handlers, which tell the app who called in x-forwarded-client-cert. A caller
 * outrigger.dev/allow-from does not list gets 403 mesh_caller_denied (per request or stream; a
 * TCP stream is closed at once). Before the sidecar has a certificate, handshakes fail (no
 * plaintext here).
 *
 * TLS 1.3 session tickets are issued so callers can resume; their keys are replaced whenever the
 * certificate or the trust bundle changes (a ticket never outlives the identity it was made
 * under) and every ticketLifetimeSeconds.
 */
export class MeshListener {
  readonly #o: MeshListenerOptions;
  readonly #tls: TlsServer;
  readonly #http: HttpServer;
  readonly #h2: StreamServer | undefined;
  readonly #sessions = new Set<Http2Session>();
  readonly #ticketLifetimeMs: number;
  #ticketTimer: Timer | undefined;
  readonly stats: MeshListenerStats = {
    accepted: 0,
    resumed: 0,
    denied: 0,
    handshakeFailures: 0,
    protocols: {},
  };

  constructor(o: MeshListenerOptions) {
    this.#o = o;
    const h = o.handlers;
    this.#http = createLimitedServer(o.limits, (req, res) => this.#request(req, res), o.log);
    this.#h2 = h.onStream ? this.#h2Server(h.onStream) : undefined;
    const lifetime = o.ticketLifetimeSeconds ?? TICKET_LIFETIME_SECONDS;
    this.#tls = createServer({
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: 'TLSv1.3',
      // Counted from the connection, not reset by bytes: a caller that connects and never (or only
      // slowly) finishes its handshake holds a descriptor for no longer than one slow request would.
      handshakeTimeout: o.limits.headersTimeoutMs,
      sessionTimeout: lifetime,
      ALPNProtocols: [
        ...(h.onStream ? [MESH_ALPN.h2] : []),
        MESH_ALPN.http1,
        ...(h.onTcp ? [MESH_ALPN.tcp] : []),
      ],
      // Per handshake, so a rotated certificate or trust bundle applies to the next connection.
      SNICallback: (_name, cb) => {
        const ctx = o.tls.context();
        if (ctx) cb(null, ctx);
        else cb(new Error('no mesh certificate yet'), undefined);
      },
    });
    this.#ticketLifetimeMs = lifetime * 1000;
    o.tls.onChange(() => this.#rotateTickets());
    this.#tls.on('secureConnection', (socket) => this.#accept(socket));
    // Node reports a failed or timed-out handshake but leaves its socket open.
    this.#tls.on('tlsClientError', (e, socket) => {
      socket.destroy();
      this.stats.handshakeFailures++;
      o.log.debug('mesh handshake failed', { reason: e.message });
    });
  }

  async start(): Promise<void> {
    await listenOn(this.#tls, this.#o.port, this.#o.host);
    this.#rotateTickets();
    // The HTTP server never listens itself (it gets the TLS sockets); this starts its
    // connection tracking, which runs the header and request timeouts.
    this.#http.emit('listening');
  }

  port(): number {
    return (this.#tls.address() as AddressInfo).port;
  }

  /** Drain: no new connections; requests and streams in flight finish. */
  stopAccepting(): void {
    this.#tls.close();
    this.#http.closeIdleConnections();
    for (const s of this.#sessions) s.close();
  }

  close(): Promise<void> {
    this.#ticketTimer?.cancel();
    return new Promise((resolve) => {
      if (!this.#tls.listening) resolve();
      else this.#tls.close(() => resolve());
      this.#http.closeAllConnections();
      this.#http.close(() => {});
      for (const s of this.#sessions) s.destroy();
      this.#h2?.server.close();
    });
  }

  #accept(socket: TLSSocket): void {
    socket.on('error', () => socket.destroy());
    const current = peerCertificateCurrent(socket, this.#o.clock.now());
    const caller = current ? peerSpiffeId(socket, this.#o.tls.trustDomain) : undefined;
    const appPort = portFromSni(socket.servername);
    if (!caller || appPort === undefined || this.#o.ownPorts.has(appPort)) {
      this.stats.handshakeFailures++;
      socket.destroy();
      return;
    }
    const protocol = socket.alpnProtocol || MESH_ALPN.http1;
    this.stats.accepted++;
    if (socket.isSessionReused()) this.stats.resumed++;
    this.stats.protocols[protocol] = (this.stats.protocols[protocol] ?? 0) + 1;
    peers.set(socket, { caller, appPort });
    const { onTcp } = this.#o.handlers;
    if (protocol === MESH_ALPN.h2 && this.#h2) return this.#h2.serve(socket);
    if (protocol === MESH_ALPN.tcp && onTcp) {
      // A byte stream has no request to answer: a caller allow-from does not list is cut off.
      if (this.#denied(caller)) {
        this.#o.log.debug('mesh TCP caller denied', { caller: formatSpiffeId(caller) });
        socket.destroy();
        return;
      }
      // The caller's ALPN only says it did not frame the bytes itself; whether they are HTTP is
      // decided here from the bytes, so the app gets the identity this listener verified, never
      // one the caller wrote. The app is dialled at once, so one that speaks first is not kept waiting.
      return tcpUnlessHttp(socket, {
        http: this.#http,
        ...(this.#h2 ? { h2: this.#h2 } : {}),
        tcp: onTcp,
      });
    }
    this.#http.emit('connection', socket);
  }

  /** Whether allow-from refuses this caller (counted). */
  #denied(caller: SpiffeId | undefined): boolean {
    if (allows(this.#o.allowFrom(), this.#o.tls.trustDomain, caller)) return false;
    this.stats.denied++;
    return true;
  }

  #deniedMessage(caller: SpiffeId | undefined): string {
    return `caller ${caller ? formatSpiffeId(caller) : 'unknown'} is not allowed by outrigger.dev/allow-from`;
  }

  #request(req: IncomingMessage, res: ServerResponse): void {
    const caller = peers.get(req.socket)?.caller;
    if (this.#denied(caller)) return void sendError(res, 'mesh_caller_denied', this.#deniedMessage(caller));
    this.#o.handlers.onRequest(req, res);
  }

  #h2Server(onStream: H2StreamHandler): StreamServer {
    return streamServer(
      (stream, headers, socket) => {
        stream.on('error', () => {});
        const caller = peers.get(socket)?.caller;
        if (this.#denied(caller))
          return void answerError(stream, isGrpc(headers), 'mesh_caller_denied', this.#deniedMessage(caller));
        onStream(stream, headers, socket);
      },
      {
        limits: this.#o.limits,
        clock: this.#o.clock,
        onSession: (session: Http2Session) => {
          this.#sessions.add(session);
          session.once('close', () => this.#sessions.delete(session));
        },
      },
    );
  }

  /** New ticket keys: every session resumed from here on was made under the current identity. */
  #rotateTickets(): void {
    this.#tls.setTicketKeys(randomBytes(48));
    this.#ticketTimer?.cancel();
    this.#ticketTimer = this.#o.clock.setTimer(this.#ticketLifetimeMs, () => this.#rotateTickets());
  }
}

/** x-forwarded-client-cert as Envoy and Istio write it: By= this workload, URI= the caller. */
export const clientCertHeader =
  (tls: MeshTls) =>
  (socket: Socket): string | undefined => {
    const p = peers.get(socket);
    const own = tls.ownId();
    return p ? `${own ? `By=${own};` : ''}URI=${formatSpiffeId(p.caller)}` : undefined;
  };
