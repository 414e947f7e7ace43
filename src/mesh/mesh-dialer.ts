import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Dial, DialCallback } from '../proxy/dial.ts';
import type { Clock, Timer } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import { MESH_ALPN, sniForPort, type MeshProtocol, type MeshTls } from './mesh-tls.ts';
import { TlsSessions } from './tls-sessions.ts';

export type { DialCallback };

export interface MeshDialerOptions {
  tls: MeshTls;
  /** The mesh listener's port on every meshed pod. */
  meshPort: number;
  clock: Clock;
  log: Logger;
  /** Until TCP is connected (and, to the mesh port, the handshake done); then the connect fails. */
  connectTimeoutMs: number;
  /** How long an endpoint that refused the mesh port is dialled in plaintext before trying again. */
  notMeshedTtlMs?: number;
  maxRemembered?: number;
  /** Offer the last TLS session again (default true; benchmarks measure without). */
  resumption?: boolean;
}

export interface MeshDialStats {
  mtls: number;
  /** mTLS connections that resumed a TLS session (no certificate exchange). */
  resumed: number;
  plaintext: number;
  notMeshed: number;
}

/**
 * Egress connections to endpoints: mutual TLS to the endpoint's mesh port when it has one, else
 * plaintext to the app port (permissive). A sidecar learns which endpoints are meshed without
 * watching Pods: it tries the mesh port, and a refused connection marks the endpoint "not meshed"
 * for a while. Only a refusal downgrades: a failed handshake or an untrusted certificate is an
 * error, never a reason to fall back to plaintext (that would let an attacker strip the TLS).
 * Without a valid certificate of its own (not issued yet, or expired) the sidecar dials plaintext.
 *
 * ALPN says what the connection carries (HTTP/1.1, h2, or TCP for the app port), SNI which app
 * port. The last TLS session per endpoint and app port is offered again (TLS 1.3 resumption).
 */
export class MeshDialer {
  readonly #o: MeshDialerOptions;
  readonly #notMeshed = new Map<string, number>();
  readonly #sessions: TlsSessions;
  readonly stats: MeshDialStats = { mtls: 0, resumed: 0, plaintext: 0, notMeshed: 0 };

  constructor(o: MeshDialerOptions) {
    this.#o = o;
    this.#sessions = new TlsSessions(o.maxRemembered);
    o.tls.onChange(() => this.#sessions.clear());
  }

  /** A dial for one protocol (the HTTP/1.1 client, the h2 session pool, TCP tunnels). */
  for(protocol: MeshProtocol): Dial {
    return (host, port, cb) => this.dial(host, port, cb, protocol);
  }

  readonly dial = (
    host: string,
    port: number,
    cb: DialCallback,
    protocol: MeshProtocol = MESH_ALPN.http1,
  ): void => {
    const context = this.#o.tls.context();
    if (!context || this.#knownPlain(host)) return this.#plain(host, port, cb);
    let secured = false;
    const timer = this.#timeout(() => socket);
    const servername = sniForPort(port);
    const key = `${host}\u0000${servername}`;
    const session = this.#o.resumption === false ? undefined : this.#sessions.get(key);
    const socket = tlsConnect({
      host,
      port: this.#o.meshPort,
      servername,
      secureContext: context,
      checkServerIdentity: this.#o.tls.checkServerIdentity,
      minVersion: 'TLSv1.3',
      ALPNProtocols: [protocol],
      ...(session ? { session } : {}),
    });
    // TLS 1.3 tickets arrive after the handshake; the latest one is offered next time.
    socket.on('session', (ticket: Buffer) => this.#sessions.set(key, ticket));
    socket.once('secureConnect', () => {
      secured = true;
      timer.cancel();
      // A listener that predates ALPN answers none: fine for HTTP/1.1, never for anything else.
      if (protocol !== MESH_ALPN.http1 && socket.alpnProtocol !== protocol) {
        socket.destroy();
        return cb(
          Object.assign(new Error(`mesh peer ${host} does not accept ${protocol}`), { code: 'EPROTO' }),
        );
      }
      this.stats.mtls++;
      if (socket.isSessionReused()) this.stats.resumed++;
      socket.setNoDelay(true);
      cb(null, socket);
    });
    socket.once('error', (e: NodeJS.ErrnoException) => {
      if (secured) return;
      timer.cancel();
      socket.destroy();
      this.#sessions.delete(key);
      if (e.code !== 'ECONNREFUSED') return cb(e);
      this.#markPlain(host);
      this.#plain(host, port, cb);
    });
  };

  #plain(host: string, port: number, cb: DialCallback): void {
    const socket = netConnect({ host, port, noDelay: true });
    const timer = this.#timeout(() => socket);
    let connected = false;
    socket.once('connect', () => {
      connected = true;
      timer.cancel();
      this.stats.plaintext++;
      cb(null, socket);
    });
    socket.once('error', (e) => {
      timer.cancel();
      if (!connected) cb(e);
    });
  }

  /**
   * A mesh port that drops packets (a NetworkPolicy that allows only app ports) or a peer that
   * never finishes the handshake fails like a connect timeout: retried elsewhere, never a reason to
   * downgrade to plaintext.
   */
  #timeout(socket: () => Socket): Timer {
    return this.#o.clock.setTimer(this.#o.connectTimeoutMs, () =>
      socket().destroy(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' })),
    );
  }

  #knownPlain(host: string): boolean {
    const until = this.#notMeshed.get(host);
    if (until === undefined) return false;
    if (until > this.#o.clock.now()) return true;
    this.#notMeshed.delete(host);
    return false;
  }

  #markPlain(host: string): void {
    if (this.#notMeshed.size >= (this.#o.maxRemembered ?? 10_000)) this.#notMeshed.clear();
    this.#notMeshed.set(host, this.#o.clock.now() + (this.#o.notMeshedTtlMs ?? 60_000));
    this.stats.notMeshed++;
    this.#o.log.debug('endpoint has no mesh listener; plaintext for a while', { host });
  }
}
