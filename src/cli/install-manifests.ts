import { readFileSync } from 'node:fs';
import { parseAllDocuments, stringify } from 'yaml';
import { appFile } from '../shared/app-root.ts';
import { OutriggerError } from '../shared/errors.ts';
import { CONTROL_PLANE, OWNED_LABEL } from './control-plane.ts';

/**
 * What `install` prints and `uninstall` takes back: the shipped manifests/ and the objects only
 * the CLI makes (the webhook TLS Secret, one sidecar binding per meshed namespace). Loaded by
 * those two commands only: it pulls in the YAML parser.
 */
export type Obj = Record<string, unknown> & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
};

export { OWNED_LABEL } from './control-plane.ts';

/** The example binding in manifests/rbac, for the namespace "demo"; install binds the meshed ones instead. */
export const EXAMPLE_BINDING = `${CONTROL_PLANE.sidecarRole}-demo`;

const MANIFESTS = appFile('manifests/');

/** Objects as one multi-document YAML stream, the way install and uninstall print them. */
export const yamlStream = (objs: readonly Obj[]): string =>
  objs.map((o) => stringify(o, { lineWidth: 0 })).join('---\n');

const parse = (text: string): unknown[] => parseAllDocuments(text).map((d) => d.toJS() as unknown);

/** manifests/gateway: what `install --gateway` adds (kubectl apply -k manifests/gateway installs the same). */
export const gatewayManifests = (): Obj[] => shippedManifests(`${MANIFESTS}gateway/`);

/** manifests/identity: what `install --identity` adds (the issuer's Deployment, Service, RBAC, budget). */
export const identityManifests = (): Obj[] => shippedManifests(`${MANIFESTS}identity/`);

const IDENTITY_LABELS = { [OWNED_LABEL.key]: OWNED_LABEL.value, 'app.kubernetes.io/component': 'identity' };

/** The mesh CA's Secret, without its data: what uninstall names. */
export const MESH_CA_SECRET: Obj = {
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: {
    name: CONTROL_PLANE.identity.caSecret,
    namespace: CONTROL_PLANE.namespace,
    labels: IDENTITY_LABELS,
  },
};

/** The trust bundle beside it (scripts/gen-mesh-ca writes the same), without its data. */
export const TRUST_BUNDLE: Obj = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: {
    name: CONTROL_PLANE.identity.trustBundle,
    namespace: CONTROL_PLANE.namespace,
    labels: IDENTITY_LABELS,
  },
};

/** manifests/gateway/gateway-api.yaml: what `install --gateway-api` adds (RBAC and the GatewayClass). */
export const gatewayApiManifests = (): Obj[] =>
  parse(readFileSync(`${MANIFESTS}gateway/gateway-api.yaml`, 'utf8')) as Obj[];

/** manifests/kustomization.yaml's resources, depth first, as kubectl kustomize lists them. */
export function shippedManifests(dir = MANIFESTS): Obj[] {
  const kustomization = parse(readFileSync(`${dir}kustomization.yaml`, 'utf8'))[0] as { resources: string[] };
  return kustomization.resources.flatMap((r) =>
    r.endsWith('.yaml')
      ? (parse(readFileSync(`${dir}${r}`, 'utf8')) as Obj[])
      : shippedManifests(`${dir}${r}/`),
  );
}

export function sidecarBinding(namespace: string): Obj {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: {
      name: `${CONTROL_PLANE.sidecarRole}-${namespace}`,
      labels: { [OWNED_LABEL.key]: OWNED_LABEL.value },
    },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: CONTROL_PLANE.sidecarRole },
    subjects: [
      { kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: `system:serviceaccounts:${namespace}` },
    ],
  };
}

/** The shape of the TLS Secret, without its data: what uninstall names. */
export const TLS_SECRET: Obj = {
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: {
    name: CONTROL_PLANE.tlsSecret,
    namespace: CONTROL_PLANE.namespace,
    labels: { [OWNED_LABEL.key]: OWNED_LABEL.value },
  },
};

/** --namespaces NS[,NS]: RFC 1123 labels, blanks dropped. */
export function parseNamespaces(raw: string): string[] {
  const named = raw
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  const bad = named.find((n) => !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(n));
  if (bad !== undefined)
    throw new OutriggerError(
      'config_invalid',
      `invalid flag --namespaces: ${JSON.stringify(bad)} is not a namespace name (RFC 1123 label)`,
    );
  return [...new Set(named)];
}

/** The REST path of one object, from its apiVersion and kind (the kinds install makes are regular plurals). */
export function objectPath(o: Pick<Obj, 'apiVersion' | 'kind' | 'metadata'>): string {
  const base = o.apiVersion.includes('/') ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
  const ns = o.metadata.namespace ? `/namespaces/${o.metadata.namespace}` : '';
  const kind = o.kind.toLowerCase();
  // The API's plurals for the kinds install makes: IngressClass -> ingressclasses, Policy -> policies.
  const plural = kind.endsWith('y')
    ? `${kind.slice(0, -1)}ies`
    : kind.endsWith('s')
      ? `${kind}es`
      : `${kind}s`;
  return `${base}${ns}/${plural}/${o.metadata.name}`;
}
