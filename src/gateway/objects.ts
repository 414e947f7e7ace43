import { isIP } from 'node:net';
import { obj, str, arr } from '../shared/json.ts';
/**
 * The slice of networking.k8s.io/v1 Ingress and IngressClass objects, and of kubernetes.io/tls
 * Secrets, that the gateway keeps. Objects are slimmed the moment they arrive (managedFields,
 * status and unrelated annotations dropped), in the API's JSON shape, so a watch event, a list item
 * and a `kubectl get -o yaml` document decode the same way.
 */
export interface GMeta {
  name: string;
  namespace: string;
  resourceVersion?: string;
  /** RFC 3339, as the API writes it; conflicts between Ingresses are settled by it. */
  creationTimestamp?: string;
  annotations?: Record<string, string>;
}

export type PathType = 'Exact' | 'Prefix' | 'ImplementationSpecific';

/** A backend: a Service port by number or by name, or a resource (not supported, kept to report it). */
export type Backend =
  | { kind: 'service'; name: string; port: { number: number } | { name: string } }
  | { kind: 'resource'; apiGroup?: string; kind_: string; name: string };

export interface IngressPath {
  path: string;
  pathType: PathType;
  backend: Backend;
}

export interface IngressRule {
  /** '' for a rule without host (it matches every host). */
  host: string;
  paths: IngressPath[];
}

export interface IngressTLS {
  hosts: string[];
  secretName?: string;
}

export interface Ingress {
  kind: 'Ingress';
  metadata: GMeta;
  spec: {
    ingressClassName?: string;
    defaultBackend?: Backend;
    rules: IngressRule[];
    tls: IngressTLS[];
  };
  /** status.loadBalancer.ingress as written: each entry's ip or hostname. */
  status?: { addresses: string[] };
}

export interface IngressClass {
  kind: 'IngressClass';
  metadata: GMeta;
  spec: { controller: string };
}

export interface TlsSecret {
  kind: 'Secret';
  metadata: GMeta;
  type: string;
  /** PEM text of tls.crt and tls.key (decoded from the Secret's base64 data). */
  cert: string;
  key: string;
}

/** The deprecated class annotation; still honoured when present, as the API asks. */
export const CLASS_ANNOTATION = 'kubernetes.io/ingress.class';
export const DEFAULT_CLASS_ANNOTATION = 'ingressclass.kubernetes.io/is-default-class';
export const TLS_SECRET_TYPE = 'kubernetes.io/tls';

/** Only the annotations the gateway reads survive slimming. */
const KEPT_ANNOTATIONS = [CLASS_ANNOTATION, DEFAULT_CLASS_ANNOTATION];

function slimMeta(raw: unknown, namespace = ''): GMeta {
  const m = obj(raw);
  const meta: GMeta = { name: str(m.name) ?? '', namespace: str(m.namespace) ?? namespace };
  const rv = str(m.resourceVersion);
  if (rv) meta.resourceVersion = rv;
  const created = str(m.creationTimestamp);
  if (created) meta.creationTimestamp = created;
  const ann = obj(m.annotations);
  const kept: Record<string, string> = {};
  for (const k of KEPT_ANNOTATIONS) {
    const v = str(ann[k]);
    if (v !== undefined) kept[k] = v;
  }
  if (Object.keys(kept).length > 0) meta.annotations = kept;
  return meta;
}

function slimBackend(raw: unknown): Backend | undefined {
  const b = obj(raw);
  const svc = obj(b.service);
  const name = str(svc.name);
  if (name) {
    const p = obj(svc.port);
    const number = typeof p.number === 'number' ? p.number : undefined;
    const portName = str(p.name);
    if (number !== undefined && number > 0) return { kind: 'service', name, port: { number } };
    if (portName) return { kind: 'service', name, port: { name: portName } };
    return undefined;
  }
  const res = obj(b.resource);
  const kind = str(res.kind);
  const resName = str(res.name);
  if (kind && resName) {
    const apiGroup = str(res.apiGroup);
    return { kind: 'resource', kind_: kind, name: resName, ...(apiGroup ? { apiGroup } : {}) };
  }
  return undefined;
}

const PATH_TYPES: ReadonlySet<string> = new Set(['Exact', 'Prefix', 'ImplementationSpecific']);

export function slimIngress(raw: unknown, namespace?: string): Ingress {
  const o = obj(raw);
  const s = obj(o.spec);
  const rules: IngressRule[] = [];
  for (const r of arr(s.rules)) {
    const rule = obj(r);
    const paths: IngressPath[] = [];
    for (const p of arr(obj(rule.http).paths)) {
      const q = obj(p);
      const backend = slimBackend(q.backend);
      const pathType = str(q.pathType) ?? '';
      // The API requires pathType and a backend; an object without them (an old client, a
      // hand-written file) is skipped rather than guessed at.
      if (!backend || !PATH_TYPES.has(pathType)) continue;
      paths.push({ path: str(q.path) ?? '/', pathType: pathType as PathType, backend });
    }
    rules.push({ host: (str(rule.host) ?? '').toLowerCase(), paths });
  }
  const tls: IngressTLS[] = arr(s.tls).map((t) => {
    const q = obj(t);
    const secretName = str(q.secretName);
    return {
      hosts: arr(q.hosts).flatMap((h) => (typeof h === 'string' ? [h.toLowerCase()] : [])),
      ...(secretName ? { secretName } : {}),
    };
  });
  const defaultBackend = slimBackend(s.defaultBackend);
  const className = str(s.ingressClassName);
  const addresses = arr(obj(obj(o.status).loadBalancer).ingress).flatMap((e) => {
    const a = str(obj(e).ip) ?? str(obj(e).hostname);
    return a ? [a] : [];
  });
  return {
    kind: 'Ingress',
    metadata: slimMeta(o.metadata, namespace),
    spec: {
      ...(className ? { ingressClassName: className } : {}),
      ...(defaultBackend ? { defaultBackend } : {}),
      rules,
      tls,
    },
    ...(addresses.length > 0 ? { status: { addresses } } : {}),
  };
}

export function slimIngressClass(raw: unknown): IngressClass {
  const o = obj(raw);
  return {
    kind: 'IngressClass',
    metadata: slimMeta(o.metadata),
    spec: { controller: str(obj(o.spec).controller) ?? '' },
  };
}

/**
 * A TLS Secret with its certificate and key as PEM text; undefined for any other Secret type or
 * one without both keys (it can serve nothing).
 */
export function slimTlsSecret(raw: unknown, namespace?: string): TlsSecret | undefined {
  const o = obj(raw);
  if (str(o.type) !== TLS_SECRET_TYPE) return undefined;
  const data = obj(o.data);
  const crt = str(data['tls.crt']);
  const key = str(data['tls.key']);
  if (!crt || !key) return undefined;
  return {
    kind: 'Secret',
    metadata: slimMeta(o.metadata, namespace),
    type: TLS_SECRET_TYPE,
    cert: Buffer.from(crt, 'base64').toString('utf8'),
    key: Buffer.from(key, 'base64').toString('utf8'),
  };
}

export const objectKey = (m: GMeta): string => `${m.namespace}/${m.name}`;

function backendToApi(b: Backend): Record<string, unknown> {
  return b.kind === 'service'
    ? { service: { name: b.name, port: b.port } }
    : { resource: { kind: b.kind_, name: b.name, ...(b.apiGroup ? { apiGroup: b.apiGroup } : {}) } };
}

/** A slimmed Ingress back in the API's JSON shape (snapshots): slimIngress(ingressToApi(x)) is x. */
export function ingressToApi(ing: Ingress): Record<string, unknown> {
  const s = ing.spec;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: ing.metadata,
    spec: {
      ...(s.ingressClassName ? { ingressClassName: s.ingressClassName } : {}),
      ...(s.defaultBackend ? { defaultBackend: backendToApi(s.defaultBackend) } : {}),
      rules: s.rules.map((r) => ({
        ...(r.host ? { host: r.host } : {}),
        http: {
          paths: r.paths.map((p) => ({
            path: p.path,
            pathType: p.pathType,
            backend: backendToApi(p.backend),
          })),
        },
      })),
      tls: s.tls,
    },
    ...(ing.status
      ? { status: { loadBalancer: { ingress: loadBalancerIngress(ing.status.addresses) } } }
      : {}),
  };
}

/** status.loadBalancer.ingress entries for addresses: an IP as `ip`, anything else as `hostname`. */
export function loadBalancerIngress(addresses: readonly string[]): ({ ip: string } | { hostname: string })[] {
  return addresses.map((a) => (isIP(a) ? { ip: a } : { hostname: a }));
}
