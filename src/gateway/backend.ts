import type { Balancers } from '../balance/balancer.ts';
import type { Resolver, ServicePort } from '../discovery/types.ts';
import { balancedAttempts, indexed } from '../proxy/egress-plan.ts';
import type { ForwardPlan } from '../proxy/forward.ts';
import type { ProxyErrorCode } from '../proxy/status.ts';
import { inZone } from '../routing/router.ts';
import type { ServiceBackend } from './table.ts';

/**
 * An Ingress backend -> the endpoints of its Service port, balanced like a sidecar's egress (P2C
 * peak-EWMA or round robin, outlier ejection, retries under a budget). As the Ingress concept
 * says, the gateway uses the Service only to find the endpoints and picks a pod itself; nothing
 * goes through the ClusterIP. A backend that cannot be served is a 503 (no_endpoints), never a 404:
 * the rule exists, its Service does not answer.
 */
export interface BackendPolicy {
  resolver: Resolver;
  balancers: Balancers;
  retryStatuses: ReadonlySet<number>;
  maxAttempts: number;
  /** How long a first lookup of a Service waits for discovery. */
  waitMs: number;
  /** The gateway's zone, for topology-aware routing (EndpointSlice hints). */
  zone?: string;
  onConnectError?: (service: string) => void;
}

export type BackendDecision =
  | { kind: 'error'; code: ProxyErrorCode; detail: string; stale: boolean; absent?: true }
  | (ForwardPlan & {
      kind: 'plan';
      stale: boolean;
      /** The Service port's appProtocol (kubernetes.io/h2c: the backend is called with h2c). */
      appProtocol?: string;
    });

const portOf = (ports: ServicePort[], want: ServiceBackend['port']): ServicePort | undefined =>
  'number' in want
    ? ports.find((p) => p.port === want.number && p.protocol === 'TCP')
    : ports.find((p) => p.name === want.name && p.protocol === 'TCP');

export async function planBackend(policy: BackendPolicy, backend: ServiceBackend): Promise<BackendDecision> {
  const service = `${backend.namespace}/${backend.name}`;
  const fail = (detail: string, stale = false): BackendDecision => ({
    kind: 'error',
    code: 'no_endpoints',
    detail,
    stale,
  });
  const res = await policy.resolver.resolve(
    { namespace: backend.namespace, name: backend.name },
    { waitMs: policy.waitMs },
  );
  if (res.kind === 'absent') {
    return {
      kind: 'error',
      code: 'no_endpoints',
      detail: `service ${service} does not exist`,
      stale: false,
      absent: true,
    };
  }
  if (res.kind === 'unknown') return fail(`no data for service ${service} yet (${res.reason})`);
  const stale = res.freshness.state === 'stale';
  const sp = portOf(res.service.ports, backend.port);
  const wanted = 'number' in backend.port ? String(backend.port.number) : backend.port.name;
  if (!sp) return fail(`service ${service} has no TCP port ${wanted}`, stale);
  const endpoints = inZone(res.service.endpoints.get(sp.name) ?? [], policy.zone);
  if (endpoints.length === 0) return fail(`service ${service} has no ready endpoints`, stale);

  const { byId, ids } = indexed(endpoints, res.service);
  const balancer = policy.balancers.routed(service, ids);
  return {
    kind: 'plan',
    stale,
    ...(sp.appProtocol ? { appProtocol: sp.appProtocol } : {}),
    next: (tried) => {
      const id = balancer.pick(ids, tried);
      return id === undefined ? undefined : byId.get(id);
    },
    ...balancedAttempts(balancer, service, ids, policy),
  };
}
