import type { Clock, Random } from '../../shared/clock.ts';
import type { Logger } from '../../shared/log.ts';
import type { OriginalDestination } from '../capture-port.ts';
import type { EgressPolicy } from '../egress-plan.ts';
import type { IngressHandler } from '../ingress.ts';
import { hopToken } from '../loop.ts';
import type { HopObserver } from '../observer.ts';
import type { H2StreamHandler } from '../sidecar.ts';
import { H2Forwarder } from './forward.ts';
import { H2Handler } from './handler.ts';
import { egressH2Route, ingressH2Route } from './routes.ts';
import { H2SessionPool } from './session-pool.ts';

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
}

export interface H2DataPath {
  egress: H2StreamHandler;
  ingress: H2StreamHandler;
  pool: H2SessionPool;
}

export function createH2DataPath(o: H2DataPathOptions): H2DataPath {
  const pool = new H2SessionPool({ clock: o.clock, connectTimeoutMs: o.connectTimeoutMs });
  const forwarder = new H2Forwarder({
    pool,
    clock: o.clock,
    responseTimeoutMs: o.requestTimeoutMs,
    idleTimeoutMs: o.idleTimeoutMs,
  });
  const common = { forwarder, observer: o.observer, clock: o.clock };
  const egress = new H2Handler({
    ...common,
    direction: 'egress',
    log: o.log.child({ listener: 'egress', protocol: 'h2' }),
    route: egressH2Route({
      policy: o.policy,
      token: hopToken(o.random),
      ...(o.originalDestination ? { originalDestination: o.originalDestination } : {}),
    }),
  });
  const ingress = new H2Handler({
    ...common,
    direction: 'ingress',
    log: o.log.child({ listener: 'ingress', protocol: 'h2' }),
    route: ingressH2Route(o.ingress),
  });
  return { egress: egress.onStream, ingress: ingress.onStream, pool };
}
