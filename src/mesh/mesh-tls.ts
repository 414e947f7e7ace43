import type { PeerCertificate, SecureContext, TLSSocket } from 'node:tls';
import { createSecureContext } from 'node:tls';
import type { Credentials } from './identity-store.ts';
import { parseSpiffeId, type SpiffeId } from './spiffe.ts';

/**
 * The app port a meshed caller wants travels in SNI as `<port>.app.outrigger.invalid` (RFC 6761
 * reserves .invalid, so the name can never be a real host). SNI rather than ALPN: the server reads
 * it before choosing its certificate, and ALPN names what the connection carries (MESH_ALPN). The
 * port is not secret (it is in the plaintext ClientHello, as the destination port of a plaintext
 * hop would be).
 */
export const APP_SNI_SUFFIX = '.app.outrigger.invalid';

/**
 * What a mesh connection carries, by ALPN: HTTP/1.1, HTTP/2 (h2 and gRPC streams) or an opaque
 * TCP stream for the app port. A caller that offers no ALPN speaks HTTP/1.1.
 */
export const MESH_ALPN = { http1: 'http/1.1', h2: 'h2', tcp: 'outrigger-tcp' } as const;
export type MeshProtocol = (typeof MESH_ALPN)[keyof typeof MESH_ALPN];

export const sniForPort = (port: number): string => `${port}${APP_SNI_SUFFIX}`;

export function portFromSni(name: string | false | undefined | null): number | undefined {
  if (!name || !name.endsWith(APP_SNI_SUFFIX)) return undefined;
  const raw = name.slice(0, -APP_SNI_SUFFIX.length);
  const port = /^\d{1,5}$/.test(raw) ? Number(raw) : NaN;
  return port >= 1 && port <= 65535 ? port : undefined;
}

/**
 * The peer's SPIFFE id: exactly one SAN, a URI, in our trust domain. Node prints unusual SAN
 * values JSON-quoted (CVE-2021-44532), and a comma means more than one name: both are refused.
 */
export function spiffeIdOf(subjectAltName: string | undefined, trustDomain: string): SpiffeId | undefined {
  if (!subjectAltName || subjectAltName.includes(',') || !subjectAltName.startsWith('URI:spiffe://'))
    return undefined;
  const id = parseSpiffeId(subjectAltName.slice('URI:'.length));
  return id && id.trustDomain === trustDomain ? id : undefined;
}

export const peerSpiffeId = (socket: TLSSocket, trustDomain: string): SpiffeId | undefined =>
  spiffeIdOf(socket.getPeerX509Certificate()?.subjectAltName, trustDomain);

/**
 * Whether the peer's certificate is still valid at `now`. A resumed TLS session carries the
 * certificate of the handshake that created it, and OpenSSL does not check it again.
 */
export function peerCertificateCurrent(socket: TLSSocket, now: number): boolean {
  const cert = socket.getPeerX509Certificate();
  return cert !== undefined && Date.parse(cert.validTo) > now;
}

interface Sources {
  identity: { current(): Credentials | undefined; onChange(fn: () => void): void };
  bundle: { pem(): string; onChange(fn: () => void): void };
}

/**
 * One secure context for both directions (a sidecar's certificate is serverAuth and clientAuth),
 * rebuilt when the certificate rotates or the trust bundle changes: new handshakes use the new
 * one, open connections keep theirs.
 */
export class MeshTls {
  readonly #s: Sources;
  readonly trustDomain: string;
  #context: SecureContext | undefined;
  #built: Credentials | undefined;
  readonly #changed: (() => void)[] = [];

  constructor(sources: Sources, trustDomain: string) {
    this.#s = sources;
    this.trustDomain = trustDomain;
    const reset = (): void => {
      this.#context = undefined;
      for (const fn of this.#changed) fn();
    };
    sources.identity.onChange(reset);
    sources.bundle.onChange(reset);
  }

  /** Undefined while the sidecar has no valid certificate (not issued yet, or expired). */
  context(): SecureContext | undefined {
    const creds = this.#s.identity.current();
    if (!creds) return undefined;
    if (!this.#context || this.#built !== creds) {
      this.#context = createSecureContext({
        key: creds.key.export({ format: 'pem', type: 'pkcs8' }),
        cert: [creds.certificate, ...creds.chain].join('\n'),
        ca: this.#s.bundle.pem(),
        minVersion: 'TLSv1.3',
      });
      this.#built = creds;
    }
    return this.#context;
  }

  /** The certificate or the trust bundle changed: TLS sessions made with the old ones are dropped. */
  onChange(fn: () => void): void {
    this.#changed.push(fn);
  }

  ownId(): string | undefined {
    return this.#s.identity.current()?.spiffeId;
  }

  /** For tls.connect: the server must prove an id of our trust domain (hostnames mean nothing here). */
  readonly checkServerIdentity = (_host: string, cert: PeerCertificate): Error | undefined =>
    spiffeIdOf(cert.subjectaltname, this.trustDomain)
      ? undefined
      : new Error(
          `peer certificate is not a mesh identity of ${this.trustDomain}: ${cert.subjectaltname ?? 'no SAN'}`,
        );
}
