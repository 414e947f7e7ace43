import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { MESH_NO_CERTIFICATE, MESH_PEER_NAMESPACE, type Dial, type DialCallback } from '../proxy/dial.ts';
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
  /**
   * How long an endpoint discovery knows nothing about, whose mesh port refused, is dialled in
   * plaintext before trying again.
   */
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
  /**
   * mTLS dials that failed: refused, reset, timed out, the handshake refused, or no certificate
   * of ours for a meshed endpoint.
   */
  failed: number;
  /** Handshakes refused because the server's identity is of another namespace than its Service. */
  wrongNamespace: number;
}

/**
 * Egress connections to endpoints: mutual TLS to the endpoint's mesh port when it has one, else
 * plaintext to the app port (permissive). Which endpoints have one, discovery says when their
 * Service declares the mesh port (see meshedAddresses), without watching Pods:
 *  - meshed: mutual TLS or nothing. A refused, reset or timed-out mesh port, a failed handshake,
 *    or no certificate of our own yet, fails this connect (the balancer retries elsewhere);
 *    anyone who can forge a reset must not be able to make us send the request in clear.
 *  - not meshed (its pod has no mesh port): plaintext, without trying the mesh port.
 *  - not known (the Service declares no mesh port): the mesh port is tried, and a refused
 *    connection marks the endpoint "not meshed" for a while. Only a refusal downgrades: a reset, a failed handshake or an untrusted certificate is an error.
 *    Without a valid certificate of its own (not issued yet, or expired) the sidecar dials
 *    plaintext.
 *
 * ALPN says what the connection carries (HTTP/1.1, h2, or TCP for the app port), SNI which app
 * port. The last TLS session per endpoint and app port is offered again (TLS 1.3 resumption).
 *
 * The server must hold an identity of our trust domain and, for an endpoint of a Service, of the
 * Service's namespace: a Service's endpoints are pods of its own namespace, so a meshed workload
 * of another namespace presenting itself at that address is refused.
 */
export class MeshDialer {
  readonly #o: MeshDialerOptions;
  readonly #notMeshed = new Map<string, number>();
  readonly #sessions: TlsSessions;
  readonly stats: MeshDialStats = {
    mtls: 0,
    resumed: 0,
    plaintext: 0,
    notMeshed: 0,
    failed: 0,
    wrongNamespace: 0,
  };

  constructor(o: MeshDialerOptions) {
    this.#o = o;
    this.#sessions = new TlsSessions(o.maxRemembered);
    o.tls.onChange(() => this.#sessions.clear());
  }

  /** A dial for one protocol (the HTTP/1.1 client, the h2 session pool, TCP tunnels). */
  for(protocol: MeshProtocol): Dial {
    return (host, port, cb, namespace, meshed) => this.#dial(host, port, cb, protocol, namespace, meshed);
  }

  #dial(
    host: string,
    port: number,
    cb: DialCallback,
    protocol: MeshProtocol,
    namespace: string | undefined,
    meshed: boolean | undefined,
  ): void {
    if (meshed === false) return this.#plain(host, port, cb);
    const context = this.#o.tls.context();
    if (!context && meshed) return this.#fail(cb, noCertificate(host));
    if (!context || (meshed === undefined && this.#knownPlain(host))) return this.#plain(host, port, cb);
    let secured = false;
    const timer = this.#timeout(() => socket);
    const servername = sniForPort(port);
    // A ticket is offered only to a dial expecting the namespace its full handshake was checked
    // for: a resumed session skips checkServerIdentity (and the client gets no peer certificate).
    const key =
      namespace === undefined ? `${host}\u0000${servername}` : `${host}\u0000${servername}\u0000${namespace}`;
    const session = this.#o.resumption === false ? undefined : this.#sessions.get(key);
    const socket = tlsConnect({
      host,
      port: this.#o.meshPort,
      servername,
      secureContext: context,
      checkServerIdentity:
        namespace === undefined ? this.#o.tls.checkServerIdentity : this.#o.tls.checkServerIn(namespace),
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
        return this.#fail(
          cb,
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
      if (e.code === MESH_PEER_NAMESPACE) this.#refused(e);
      if (meshed || e.code !== 'ECONNREFUSED') return this.#fail(cb, e);
      this.#markPlain(host);
      this.#plain(host, port, cb);
    });
  }

  #fail(cb: DialCallback, e: NodeJS.ErrnoException): void {
    this.stats.failed++;
    cb(e);
  }

  #refused(e: Error): void {
    this.stats.wrongNamespace++;
    this.#o.log.warn('mesh peer of another namespace than its Service refused', { error: e.message });
  }

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

const noCertificate = (host: string): NodeJS.ErrnoException =>
  Object.assign(new Error(`no mesh certificate yet for the meshed endpoint ${host}`), {
    code: MESH_NO_CERTIFICATE,
  });
