import type { Metrics } from '../admin/metrics.ts';
import type { Balancers } from '../balance/balancer.ts';
import type { OriginalDestination } from '../proxy/capture-port.ts';
import { EgressHandler } from '../proxy/egress.ts';
import type { EgressPolicy } from '../proxy/egress-plan.ts';
import type { Forwarder } from '../proxy/forward.ts';
import { markTunnel, speaksH2c } from '../proxy/h2/routes.ts';
import type { HopObserver } from '../proxy/observer.ts';
import type { Socket } from 'node:net';
import { AffinityTable } from '../routing/affinity.ts';
import { Router } from '../routing/router.ts';
import type { Clock, Random } from '../shared/clock.ts';
import type { DataPathConfig, DataPathDeps } from './data-path.ts';

/** Attempts per request: the first plus two retries, as Istio's default retry policy. */
const MAX_ATTEMPTS = 3;

/**
 * The app's outbound side: which Service a request names, which endpoint serves it, and the handler
 * that forwards it. The policy is shared with the h2 egress, so both protocols route alike.
 */
export function createEgress(
  config: DataPathConfig,
  deps: DataPathDeps,
  c: {
    balancers: Balancers;
    forwarder: Forwarder;
    metrics: Metrics;
    observer: HopObserver;
    clock: Clock;
    random: Random;
    /** This sidecar's own listeners, which egress must never dial (a loop). */
    loopPorts: ReadonlySet<number>;
    originalDestination: OriginalDestination | undefined;
    /** A CONNECT tunnel that speaks h2c is handed to the h2 egress (known only once it exists). */
    adoptH2: (socket: Socket, head: Buffer) => Promise<void>;
  },
): { policy: EgressPolicy; egress: EgressHandler } {
  const policy: EgressPolicy = {
    router: new Router({
      resolver: deps.resolver,
      namespace: deps.namespace,
      clusterDomain: config.clusterDomain,
      waitMs: deps.discoveryWaitMs ?? 1_000,
      ...(deps.nodeName ? { nodeName: deps.nodeName } : {}),
      ...(deps.zone ? { zone: deps.zone } : {}),
    }),
    balancers: c.balancers,
    affinity: new AffinityTable(c.clock),
    egressPolicy: config.egressPolicy as 'allow-all' | 'cluster-only',
    ownPorts: c.loopPorts,
    retryStatuses: new Set(config.retryStatuses),
    maxAttempts: MAX_ATTEMPTS,
    onConnectError: (service) => c.metrics.connectError(service),
    ...(deps.routes
      ? {
          routes: {
            table: () => deps.routes!.table(),
            namespace: deps.namespace,
            clusterDomain: config.clusterDomain,
            random: c.random,
          },
        }
      : {}),
  };
  const egress = new EgressHandler({
    policy,
    forwarder: c.forwarder,
    observer: c.observer,
    log: deps.log.child({ listener: 'egress' }),
    clock: c.clock,
    random: c.random,
    ...(c.originalDestination ? { originalDestination: c.originalDestination } : {}),
    connectTimeoutMs: config.connectTimeoutMs,
    idleTimeoutMs: config.idleTimeoutMs,
    ...(deps.detectTimeoutMs !== undefined ? { detectTimeoutMs: deps.detectTimeoutMs } : {}),
    ...(deps.mesh ? { tcpDial: deps.mesh.dialTcp } : {}),

    h2Tunnel: {
      accepts: speaksH2c,
      adopt: (socket, head, dest): Promise<void> => {
        markTunnel(socket, dest);
        return c.adoptH2(socket, head);
      },
    },
  });
  return { policy, egress };
}
