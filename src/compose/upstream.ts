import type { Metrics } from '../admin/metrics.ts';
import { Balancers, type Algorithm } from '../balance/balancer.ts';
import type { Config } from '../config/options.ts';
import { Forwarder } from '../proxy/forward.ts';
import { UpstreamClient, type UpstreamClientOptions } from '../proxy/upstream-client.ts';
import type { Clock, Random } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';

/**
 * The upstream half every proxying command shares: per-Service balancers (ejections counted and
 * logged), the upstream client with its timeouts, and the forwarder over it.
 */
export function createUpstream(
  config: Pick<Config, 'balancer' | 'connectTimeoutMs' | 'requestTimeoutMs' | 'idleTimeoutMs'>,
  deps: {
    metrics: Metrics;
    log: Logger;
    clock: Clock;
    random: Random;
    /** Mutual TLS to meshed endpoints (the sidecar's egress). */
    dial?: UpstreamClientOptions['dial'];
  },
): { balancers: Balancers; upstream: UpstreamClient; forwarder: Forwarder } {
  const { metrics, log, clock, random } = deps;
  const balancers = new Balancers({
    algorithm: config.balancer as Algorithm,
    clock,
    random,
    onEject: (service, endpoint) => {
      metrics.ejection(service);
      log.warn('endpoint ejected', { service, endpoint });
    },
  });
  const upstream = new UpstreamClient({
    clock,
    connectTimeoutMs: config.connectTimeoutMs,
    responseTimeoutMs: config.requestTimeoutMs,
    idleTimeoutMs: config.idleTimeoutMs,
    ...(deps.dial ? { dial: deps.dial } : {}),
  });
  const forwarder = new Forwarder({ client: upstream, clock, idleTimeoutMs: config.idleTimeoutMs });
  return { balancers, upstream, forwarder };
}
