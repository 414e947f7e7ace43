import { AdminServer } from '../admin/server.ts';
import type { Metrics } from '../admin/metrics.ts';
import type { Balancers } from '../balance/balancer.ts';
import type { Sidecar } from '../proxy/sidecar.ts';
import type { DataPathConfig, DataPathDeps } from './data-path.ts';
import { discoveryReadiness } from './discovery.ts';

/**
 * The admin port: readiness (discovery synced, not draining, a certificate when strict), metrics,
 * and the /debug views of every part of the data path.
 */
export function createAdmin(
  config: DataPathConfig,
  deps: DataPathDeps,
  c: {
    metrics: Metrics;
    balancers: Balancers;
    sidecar: Sidecar;
    connections: () => Record<string, unknown>;
    draining: () => boolean;
    drain: () => void;
  },
): AdminServer {
  const { mesh, resolver } = deps;
  return new AdminServer({
    host: deps.hosts?.admin ?? '::',
    port: config.adminPort,
    readiness: () => {
      const certified = mesh?.ready() ?? true;
      const draining = c.draining();
      return {
        ready: resolver.ready() && !draining && certified,
        detail: {
          discovery: discoveryReadiness(resolver.status()),
          draining,
          ...(mesh ? { meshCertificate: certified } : {}),
        },
      };
    },
    metrics: c.metrics,
    debug: {
      discovery: () => resolver.status(),
      config: () => deps.configView?.() ?? config,
      balancer: () => c.balancers.view(),
      connections: () => ({ ...c.sidecar.connections(), ...c.connections() }),
      ...(mesh ? { mesh: () => mesh.stats() } : {}),
      ...deps.debugExtra,
    },
    drain: c.drain,
    ...(deps.appHealth ? { appHealth: deps.appHealth } : {}),
  });
}
