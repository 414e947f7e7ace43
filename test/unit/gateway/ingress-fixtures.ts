import { slimIngress, type Ingress } from '../../../src/gateway/objects.ts';

/** Compact Ingress builders for the gateway's tests, in the API's JSON shape. */
export interface PathSpec {
  path: string;
  type?: 'Exact' | 'Prefix' | 'ImplementationSpecific';
  svc: string;
  port?: number | string;
}

export interface IngressSpecLite {
  name: string;
  namespace?: string;
  created?: string;
  className?: string | null;
  annotations?: Record<string, string>;
  rules?: { host?: string; paths: PathSpec[] }[];
  defaultBackend?: { svc: string; port?: number | string };
  tls?: { hosts: string[]; secretName?: string }[];
}

const port = (p: number | string | undefined): Record<string, unknown> =>
  typeof p === 'string' ? { name: p } : { number: p ?? 80 };

export function rawIngress(s: IngressSpecLite): Record<string, unknown> {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: {
      name: s.name,
      namespace: s.namespace ?? 'default',
      creationTimestamp: s.created ?? '2026-01-01T00:00:00Z',
      ...(s.annotations ? { annotations: s.annotations } : {}),
    },
    spec: {
      ...(s.className === null ? {} : { ingressClassName: s.className ?? 'outrigger' }),
      ...(s.defaultBackend
        ? { defaultBackend: { service: { name: s.defaultBackend.svc, port: port(s.defaultBackend.port) } } }
        : {}),
      rules: (s.rules ?? []).map((r) => ({
        ...(r.host ? { host: r.host } : {}),
        http: {
          paths: r.paths.map((p) => ({
            path: p.path,
            pathType: p.type ?? 'Prefix',
            backend: { service: { name: p.svc, port: port(p.port) } },
          })),
        },
      })),
      ...(s.tls ? { tls: s.tls } : {}),
    },
  };
}

export const ingress = (s: IngressSpecLite): Ingress => slimIngress(rawIngress(s));
