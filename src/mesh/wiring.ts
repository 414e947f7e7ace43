import type { Socket } from 'node:net';
import type { AllowRule } from '../config/parse.ts';
import type { Dial } from '../proxy/dial.ts';
import type { PeerIdentity } from '../proxy/observer.ts';
import type { ServerLimits } from '../proxy/server.ts';
import type { Clock } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import { callerPeers } from './caller-peer.ts';
import { MeshDialer } from './mesh-dialer.ts';
import { clientCertHeader, meshDestination, MeshListener, type MeshHandlers } from './mesh-listener.ts';
import { MESH_ALPN, type MeshTls } from './mesh-tls.ts';

/** What the data path needs from the mesh: a dialer for egress and a listener for meshed callers. */
export interface MeshWiring {
  /** HTTP/1.1 connections (the upstream client's keep-alive pools). */
  dial: Dial;
  /** The h2 session pool's connections (h2 and gRPC). */
  dialH2: Dial;
  /** Opaque TCP streams (transparent capture, CONNECT) to a Service's endpoints. */
  dialTcp: Dial;
  destination: (socket: Socket) => { address: string; port: number } | undefined;
  callerIdentity: (socket: Socket) => string | undefined;
  /** The caller for spans and metric labels (see caller-peer.ts). */
  peer: (socket: Socket) => PeerIdentity | undefined;
  listener(handlers: MeshHandlers, ownPorts: ReadonlySet<number>, limits: ServerLimits): MeshListener;
  /** Strict pods serve nobody without a certificate: unready until they hold one. */
  ready(): boolean;
  /** Why the plaintext ingress refuses a caller (strict mode, or allow-from rules); loopback never. */
  refusePlaintext: (socket: Socket) => string | undefined;
  stats(): unknown;
}

const loopback = (addr: string | undefined): boolean =>
  !!addr && (addr === '::1' || addr.startsWith('127.') || addr.startsWith('::ffff:127.'));

export function meshWiring(o: {
  tls: MeshTls;
  /** The port peers' mesh listeners are dialled on, and by default this one's own. */
  meshPort: number;
  /** This sidecar's mesh listener port when it is not meshPort (port 0: tests own their ports). */
  listenPort?: number;
  host?: string;
  appHost: string;
  allowFrom: () => readonly AllowRule[];
  mode: 'permissive' | 'strict';
  connectTimeoutMs: number;
  clock: Clock;
  log: Logger;
}): MeshWiring {
  const dialer = new MeshDialer({
    tls: o.tls,
    meshPort: o.meshPort,
    connectTimeoutMs: o.connectTimeoutMs,
    clock: o.clock,
    log: o.log,
  });
  let listener: MeshListener | undefined;
  return {
    dial: dialer.for(MESH_ALPN.http1),
    dialH2: dialer.for(MESH_ALPN.h2),
    dialTcp: dialer.for(MESH_ALPN.tcp),
    destination: meshDestination(o.appHost),
    callerIdentity: clientCertHeader(o.tls),
    peer: callerPeers(o.tls.trustDomain),
    listener: (handlers, ownPorts, limits) =>
      (listener = new MeshListener({
        host: o.host ?? '::',
        port: o.listenPort ?? o.meshPort,
        tls: o.tls,
        allowFrom: o.allowFrom,
        handlers,
        ownPorts,
        limits,
        clock: o.clock,
        log: o.log.child({ listener: 'mesh' }),
      })),
    ready: () => o.mode !== 'strict' || o.tls.ownId() !== undefined,
    refusePlaintext: (socket) => {
      if (loopback(socket.remoteAddress)) return undefined;
      if (o.mode === 'strict') return 'this pod accepts mutual TLS only (outrigger.dev/mtls: strict)';
      if (o.allowFrom().length > 0) return 'outrigger.dev/allow-from admits meshed callers only';
      return undefined;
    },
    stats: () => ({ egress: dialer.stats, inbound: listener?.stats }),
  };
}
