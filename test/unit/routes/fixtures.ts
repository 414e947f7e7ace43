import type { RequestView } from '../../../src/routes/match.ts';
import {
  slimGateway,
  slimGatewayClass,
  slimGRPCRoute,
  slimHTTPRoute,
  slimReferenceGrant,
  type GRPCRoute,
  type HTTPRoute,
} from '../../../src/routes/objects.ts';
import { GatewayRouteTable } from '../../../src/routes/table.ts';

export const CONTROLLER = 'outrigger.dev/gateway';

export const gatewayClass = (name = 'outrigger', controllerName = CONTROLLER) =>
  slimGatewayClass({ metadata: { name }, spec: { controllerName } });

export const gateway = (listeners: unknown[], ns = 'infra', name = 'edge', className = 'outrigger') =>
  slimGateway({ metadata: { namespace: ns, name }, spec: { gatewayClassName: className, listeners } });

export const httpListener = (extra: Record<string, unknown> = {}) => ({
  name: 'http',
  port: 80,
  protocol: 'HTTP',
  allowedRoutes: { namespaces: { from: 'All' } },
  ...extra,
});

export const route = (
  name: string,
  spec: Record<string, unknown>,
  ns = 'shop',
  created = '2026-01-01T00:00:00Z',
) =>
  slimHTTPRoute({
    metadata: { namespace: ns, name, creationTimestamp: created },
    spec: { parentRefs: [{ name: 'edge', namespace: 'infra' }], ...spec },
  });

export const grpcRoute = (
  name: string,
  spec: Record<string, unknown>,
  ns = 'shop',
  created = '2026-01-01T00:00:00Z',
) =>
  slimGRPCRoute({
    metadata: { namespace: ns, name, creationTimestamp: created },
    spec: { parentRefs: [{ name: 'edge', namespace: 'infra' }], ...spec },
  });

export const svc = (name: string, port = 80, extra: Record<string, unknown> = {}) => ({
  name,
  port,
  ...extra,
});

export const grant = (ns: string, fromNs: string, toName?: string) =>
  slimReferenceGrant({
    metadata: { namespace: ns, name: 'g' },
    spec: {
      from: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', namespace: fromNs }],
      to: [{ group: '', kind: 'Service', ...(toName ? { name: toName } : {}) }],
    },
  });

export function tableOf(
  routes: (HTTPRoute | GRPCRoute)[],
  listeners: unknown[] = [httpListener()],
  grants: ReturnType<typeof grant>[] = [],
  namespaces = new Map<string, Record<string, string>>(),
): GatewayRouteTable {
  return new GatewayRouteTable({
    namespaces,
    controller: CONTROLLER,
    classes: [gatewayClass(), gatewayClass('other', 'example.com/other')],
    gateways: [gateway(listeners)],
    routes: routes.filter((r) => r.kind === 'HTTPRoute'),
    grpcRoutes: routes.filter((r) => r.kind === 'GRPCRoute'),
    grants,
  });
}

export function req(
  path: string,
  o: { method?: string; headers?: Record<string, string>; query?: string } = {},
): RequestView {
  const headers = Object.fromEntries(Object.entries(o.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  return { method: o.method ?? 'GET', path, query: o.query ?? '', header: (n) => headers[n] };
}

/** "route#rule" of what the table selects, or undefined. */
export function pick(
  t: GatewayRouteTable,
  host: string,
  path: string,
  o: Parameters<typeof req>[1] = {},
  scheme: 'http' | 'https' = 'http',
) {
  const s = t.lookup(scheme, host, req(path, o));
  return s && `${s.rule.route}#${s.rule.index}`;
}
