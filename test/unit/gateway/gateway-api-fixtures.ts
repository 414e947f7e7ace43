import { startGateway, type Gateway, type GatewayDeps } from '../../../src/compose/gateway.ts';
import { loadGatewayConfig } from '../../../src/config/gateway-options.ts';
import { CONTROLLER } from '../../../src/gateway/classes.ts';
import type { FakeKubeApi } from '../../harness/fake-kube-api.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

/**
 * The composed gateway's Gateway API tests: Services in namespace shop whose one endpoint is a
 * loopback backend, HTTPRoutes there attached to Gateway infra/edge, our GatewayClass, and the
 * gateway started on free ports once discovery watches.
 */
export const GW = '/apis/gateway.networking.k8s.io/v1';

type Obj = Parameters<FakeKubeApi['put']>[1];
export const putIn =
  (api: FakeKubeApi) =>
  (path: string, o: unknown): void =>
    api.put(path, o as Obj);

/** Service shop/name, port 80 (named http, appProtocol if given) -> 127.0.0.1:port. */
export function loopbackService(api: FakeKubeApi, name: string, port: number, appProtocol?: string): void {
  const put = putIn(api);
  put('/api/v1/services', {
    metadata: { namespace: 'shop', name },
    spec: {
      clusterIP: '10.96.0.20',
      ports: [
        {
          name: 'http',
          port: 80,
          protocol: 'TCP',
          targetPort: 'http',
          ...(appProtocol ? { appProtocol } : {}),
        },
      ],
    },
  });
  put('/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices', {
    metadata: { namespace: 'shop', name: `${name}-1`, labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
    ports: [{ name: 'http', port, protocol: 'TCP' }],
  });
}

export const shopRoute = (name: string, spec: Record<string, unknown>) => ({
  kind: 'HTTPRoute',
  metadata: { namespace: 'shop', name, creationTimestamp: '2026-01-01T00:00:00Z' },
  spec: { parentRefs: [{ name: 'edge', namespace: 'infra' }], ...spec },
});

export const ourGatewayClass = (api: FakeKubeApi): void =>
  putIn(api)(`${GW}/gatewayclasses`, {
    kind: 'GatewayClass',
    metadata: { name: 'outrigger' },
    spec: { controllerName: CONTROLLER },
  });

/** `outrigger gateway --gateway-api` on free loopback ports; resolves once discovery watches. */
export async function startApiGateway(api: FakeKubeApi, deps: Partial<GatewayDeps> = {}): Promise<Gateway> {
  const config = loadGatewayConfig({
    flags: { httpPort: '1', httpsPort: '1', adminPort: '1', listenHost: '127.0.0.1', gatewayApi: 'true' },
  });
  const gateway = await startGateway(
    { ...config, httpPort: 0, httpsPort: 0, adminPort: 0 },
    { api, log: memoryLogger('warn'), tuning: { discoveryWaitMs: 2_000 }, ...deps },
  );
  for (let i = 0; i < 100 && gateway.resolver.status().subscriptions < 4; i++)
    await new Promise((r) => setTimeout(r, 10));
  return gateway;
}
