import type { Endpoint, ServiceInfo } from '../../../src/discovery/types.ts';

export function ep(address: string, port: number, extra: Partial<Endpoint> = {}): Endpoint {
  return { address, port, ready: true, serving: true, terminating: false, ...extra };
}

export function service(
  namespace: string,
  name: string,
  opts: Partial<ServiceInfo> & { eps?: Record<string, Endpoint[]> } = {},
): ServiceInfo {
  const { eps, ...rest } = opts;
  return {
    key: { namespace, name },
    type: 'ClusterIP',
    headless: false,
    clusterIPs: [],
    ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
    sessionAffinity: 'None',
    affinityTimeoutSeconds: 10800,
    internalTrafficPolicy: 'Cluster',
    endpoints: new Map(Object.entries(eps ?? { http: [ep('10.0.0.1', 8080)] })),
    ...rest,
  };
}
