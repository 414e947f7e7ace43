import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createServer, type TLSSocket, type Server as TlsServer } from 'node:tls';
import type { AllowRule } from '../config/parse.ts';
import { createLimitedServer, type ServerLimits } from '../proxy/server.ts';
import { sendError } from '../proxy/status.ts';
import { listenOn } from '../shared/listen.ts';
import type { Logger } from '../shared/log.ts';
import { allows } from './allow-from.ts';
import { peerSpiffeId, portFromSni, type MeshTls } from './mesh-tls.ts';
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

export interface MeshListenerOptions {
  host: string;
  port: number;
  tls: MeshTls;
  allowFrom: () => readonly AllowRule[];
  /** The ingress handler that forwards to the app (destination: meshDestination). */
  onRequest: (req: IncomingMessage, res: ServerResponse) => void;
  /** The sidecar's own ports: never a target. */
  ownPorts: ReadonlySet<number>;
  limits: ServerLimits;
  log: Logger;
}

/**
 * The mesh listener (Linkerd's inbound port): mutual TLS only, the caller's certificate verified
 * against the trust bundle and required to carry one SPIFFE id of our trust domain; the app port
 * from SNI. HTTP/1 inside the tunnel goes through the ingress handler, which tells the app who
 * called in x-forwarded-client-cert. A caller outrigger.dev/allow-from does not list gets 403
 * mesh_caller_denied. Before the sidecar has a certificate, handshakes fail (no plaintext here).
 */
export class MeshListener {
  readonly #o: MeshListenerOptions;
  readonly #tls: TlsServer;
  readonly #http: HttpServer;
  readonly stats = { accepted: 0, denied: 0, handshakeFailures: 0 };

  constructor(o: MeshListenerOptions) {
    this.#o = o;
    this.#http = createLimitedServer(o.limits, (req, res) => this.#request(req, res), o.log);
    this.#tls = createServer({
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: 'TLSv1.3',
      // Per handshake, so a rotated certificate or trust bundle applies to the next connection.
      SNICallback: (_name, cb) => {
        const ctx = o.tls.context();
        if (ctx) cb(null, ctx);
        else cb(new Error('no mesh certificate yet'), undefined);
      },
    });
    this.#tls.on('secureConnection', (socket) => this.#accept(socket));
    this.#tls.on('tlsClientError', (e) => {
      this.stats.handshakeFailures++;
      o.log.debug('mesh handshake failed', { reason: e.message });
    });
  }

  async start(): Promise<void> {
    await listenOn(this.#tls, this.#o.port, this.#o.host);
    // The HTTP server never listens itself (it gets the TLS sockets); this starts its
    // connection tracking, which runs the header and request timeouts.
    this.#http.emit('listening');
  }

  port(): number {
    return (this.#tls.address() as AddressInfo).port;
  }

  /** Drain: no new connections; requests in flight finish. */
  stopAccepting(): void {
    this.#tls.close();
    this.#http.closeIdleConnections();
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (!this.#tls.listening) resolve();
      else this.#tls.close(() => resolve());
      this.#http.closeAllConnections();
      this.#http.close(() => {});
    });
  }

  #accept(socket: TLSSocket): void {
    socket.on('error', () => socket.destroy());
    const caller = peerSpiffeId(socket, this.#o.tls.trustDomain);
    const appPort = portFromSni(socket.servername);
    if (!caller || appPort === undefined || this.#o.ownPorts.has(appPort)) {
      this.stats.handshakeFailures++;
      socket.destroy();
      return;
    }
    this.stats.accepted++;
    peers.set(socket, { caller, appPort });
    this.#http.emit('connection', socket);
  }

  #request(req: IncomingMessage, res: ServerResponse): void {
    const peer = peers.get(req.socket);
    if (!peer || !allows(this.#o.allowFrom(), this.#o.tls.trustDomain, peer.caller)) {
      this.stats.denied++;
      sendError(
        res,
        'mesh_caller_denied',
        `caller ${peer ? formatSpiffeId(peer.caller) : 'unknown'} is not allowed by outrigger.dev/allow-from`,
      );
      return;
    }
    this.#o.onRequest(req, res);
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
