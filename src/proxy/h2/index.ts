import type { Socket } from 'node:net';
import type { Clock, Random } from '../../shared/clock.ts';
import type { Logger } from '../../shared/log.ts';
import type { OriginalDestination } from '../capture-port.ts';
import type { EgressPolicy } from '../egress-plan.ts';
import type { IngressHandler } from '../ingress.ts';
import { hopToken } from '../loop.ts';
import type { HopObserver, PeerIdentity } from '../observer.ts';
import type { H2StreamHandler } from './stream-server.ts';
import { H2Forwarder } from './forward.ts';
import { H2Handler, type H2HandlerOptions } from './handler.ts';
import { egressH2Route, ingressH2Route } from './routes.ts';
import { H2SessionPool } from './session-pool.ts';
import type { Dial } from '../dial.ts';

/** HTTP/2 and gRPC for both listeners: one upstream session pool, one handler per direction. */
export interface H2DataPathOptions {
  policy: EgressPolicy;
  ingress: IngressHandler;
  observer: HopObserver;
  log: Logger;
  clock: Clock;
  random: Random;
  originalDestination?: OriginalDestination;
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  idleTimeoutMs: number;
  /** Why the plaintext ingress refuses a caller (mTLS strict, allow-from). */
  refuse?: (socket: Socket) => string | undefined;
  /**
   * Mutual TLS: egress sessions run over the mesh dialer, and the mesh listener's streams go to
   * the app (its own pool: the app next door is always plaintext) with the caller's identity.
   */
  mesh?: {
    dial: Dial;
    ingress: IngressHandler;
    callerIdentity: (socket: Socket) => string | undefined;
    peer: (socket: Socket) => PeerIdentity | undefined;
  };
}

export interface H2DataPath {
  egress: H2StreamHandler;
  ingress: H2StreamHandler;
  /** The mesh listener's streams (with mTLS). */
  mesh?: H2StreamHandler;
  pool: H2SessionPool;
  stats(): { endpoints: number; sessions: number; streams: number; app?: unknown };
  close(): void;
}

export function createH2DataPath(o: H2DataPathOptions): H2DataPath {
  const timeouts = {
    clock: o.clock,
    responseTimeoutMs: o.requestTimeoutMs,
    idleTimeoutMs: o.idleTimeoutMs,
  };
  const poolOf = (dial?: Dial): H2SessionPool =>
    new H2SessionPool({ clock: o.clock, connectTimeoutMs: o.connectTimeoutMs, ...(dial ? { dial } : {}) });
  const pool = poolOf(o.mesh?.dial);
  const appPool = o.mesh ? poolOf() : pool;
  const forwarder = new H2Forwarder({ pool, ...timeouts });
  const appForwarder = o.mesh ? new H2Forwarder({ pool: appPool, ...timeouts }) : forwarder;
  const common = { observer: o.observer, clock: o.clock };
  const handler = (
    direction: 'egress' | 'ingress',
    listener: string,
    f: H2Forwarder,
    route: H2HandlerOptions['route'],
    peer?: H2HandlerOptions['peer'],
  ): H2StreamHandler =>
    new H2Handler({
      ...common,
      direction,
      forwarder: f,
      log: o.log.child({ listener, protocol: 'h2' }),
      route,
      ...(peer ? { peer } : {}),
    }).onStream;
  const egress = handler(
    'egress',
    'egress',
    forwarder,
    egressH2Route({
      policy: o.policy,
      token: hopToken(o.random),
      ...(o.originalDestination ? { originalDestination: o.originalDestination } : {}),
    }),
  );
  const ingress = handler(
    'ingress',
    'ingress',
    appForwarder,
    ingressH2Route(o.ingress, o.refuse ? { refuse: o.refuse } : {}),
  );
  const mesh = o.mesh
    ? handler(
        'ingress',
        'mesh',
        appForwarder,
        ingressH2Route(o.mesh.ingress, { callerIdentity: o.mesh.callerIdentity }),
        o.mesh.peer,
      )
    : undefined;
  return {
    egress,
    ingress,
    ...(mesh ? { mesh } : {}),
    pool,
    stats: () => ({ ...pool.stats(), ...(appPool !== pool ? { app: appPool.stats() } : {}) }),
    close: () => {
      pool.close();
      appPool.close();
    },
  };
}
