/**
 * The slice of Kubernetes' Service and EndpointSlice objects that discovery keeps. Objects are
 * slimmed the moment they arrive (managedFields, annotations and status dropped): a sidecar runs in
 * every pod, so the store holds only what the merge reads. The shapes follow the API's JSON, so a
 * `kubectl get -o yaml` document and a watch event decode the same way.
 */

import { obj, str, num, arr, bool } from '../shared/json.ts';
export interface KMeta {
  name: string;
  namespace: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
}

export interface KServicePort {
  name?: string;
  port: number;
  protocol?: string;
  appProtocol?: string;
  targetPort?: number | string;
}

export interface KService {
  kind: 'Service';
  metadata: KMeta;
  spec: {
    type?: string;
    clusterIP?: string;
    clusterIPs?: string[];
    externalName?: string;
    ports?: KServicePort[];
    sessionAffinity?: string;
    sessionAffinityConfig?: { clientIP?: { timeoutSeconds?: number } };
    internalTrafficPolicy?: string;
  };
}

export interface KEndpoint {
  addresses: string[];
  conditions?: { ready?: boolean | null; serving?: boolean | null; terminating?: boolean | null };
  hostname?: string;
  nodeName?: string;
  zone?: string;
  hints?: { forZones?: { name?: string }[] };
  targetRef?: { kind?: string; name?: string };
}

export interface KSlicePort {
  name?: string | null;
  port?: number | null;
  protocol?: string | null;
  appProtocol?: string;
}

export interface KEndpointSlice {
  kind: 'EndpointSlice';
  metadata: KMeta;
  addressType: string;
  endpoints: KEndpoint[];
  ports: KSlicePort[] | null;
}

export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/**
 * Drops undefined fields so slimmed objects stay small and JSON golden files tidy. Builds a new
 * object instead of `delete`, which would turn every stored object into a slow dictionary.
 */
function defined<T extends object>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const k in o) if (o[k] !== undefined) out[k] = o[k];
  return out as T;
}

function slimMeta(raw: unknown, withLabels: boolean): KMeta {
  const m = obj(raw);
  const labels = obj(m.labels);
  const keep: Record<string, string> = {};
  const name = labels[SERVICE_NAME_LABEL];
  if (withLabels && typeof name === 'string') keep[SERVICE_NAME_LABEL] = name;
  return defined({
    name: str(m.name) ?? '',
    namespace: str(m.namespace) ?? '',
    resourceVersion: str(m.resourceVersion),
    labels: withLabels ? keep : undefined,
  });
}

export function slimService(raw: unknown, namespace?: string): KService {
  const o = obj(raw);
  const s = obj(o.spec);
  const meta = slimMeta(o.metadata, false);
  if (!meta.namespace && namespace) meta.namespace = namespace;
  const timeout = num(obj(obj(s.sessionAffinityConfig).clientIP).timeoutSeconds);
  return {
    kind: 'Service',
    metadata: meta,
    spec: defined({
      type: str(s.type),
      clusterIP: str(s.clusterIP),
      clusterIPs: Array.isArray(s.clusterIPs)
        ? arr(s.clusterIPs).filter((x) => typeof x === 'string')
        : undefined,
      externalName: str(s.externalName),
      ports: arr(s.ports).map((p) => {
        const q = obj(p);
        const tp = q.targetPort;
        return defined({
          name: str(q.name),
          port: num(q.port) ?? 0,
          protocol: str(q.protocol),
          appProtocol: str(q.appProtocol),
          targetPort: typeof tp === 'number' || typeof tp === 'string' ? tp : undefined,
        });
      }),
      sessionAffinity: str(s.sessionAffinity),
      sessionAffinityConfig: timeout === undefined ? undefined : { clientIP: { timeoutSeconds: timeout } },
      internalTrafficPolicy: str(s.internalTrafficPolicy),
    }),
  };
}

export function slimSlice(raw: unknown, namespace?: string): KEndpointSlice {
  const o = obj(raw);
  const meta = slimMeta(o.metadata, true);
  if (!meta.namespace && namespace) meta.namespace = namespace;
  return {
    kind: 'EndpointSlice',
    metadata: meta,
    addressType: str(o.addressType) ?? '',
    endpoints: arr(o.endpoints).map((e) => {
      const q = obj(e);
      const c = obj(q.conditions);
      const ref = obj(q.targetRef);
      return defined({
        addresses: arr(q.addresses).filter((a): a is string => typeof a === 'string'),
        conditions: defined({
          ready: bool(c.ready),
          serving: bool(c.serving),
          terminating: bool(c.terminating),
        }),
        hostname: str(q.hostname),
        nodeName: str(q.nodeName),
        zone: str(q.zone),
        hints:
          q.hints === undefined || q.hints === null
            ? undefined
            : { forZones: arr(obj(q.hints).forZones).map((z) => defined({ name: str(obj(z).name) })) },
        targetRef:
          q.targetRef === undefined ? undefined : defined({ kind: str(ref.kind), name: str(ref.name) }),
      });
    }),
    ports:
      o.ports === null || o.ports === undefined
        ? null
        : arr(o.ports).map((p) => {
            const q = obj(p);
            return defined({
              name: q.name === null ? null : str(q.name),
              port: q.port === null ? null : num(q.port),
              protocol: str(q.protocol),
              appProtocol: str(q.appProtocol),
            });
          }),
  };
}

/** The Service a slice belongs to, or undefined: kube-proxy ignores slices without the label. */
export const sliceServiceName = (s: KEndpointSlice): string | undefined =>
  s.metadata.labels?.[SERVICE_NAME_LABEL];
