import { INJECTION_LABEL } from '../config/options.ts';
import { OutriggerError } from '../shared/errors.ts';
import { CONTROL_PLANE, madeByInstall } from './control-plane.ts';
import type { InstalledMeshCa } from './install-mesh-ca.ts';
import type { KubeApi } from './kube-api.ts';

/**
 * The install already in the cluster, as `install` needs it to change nothing it was not asked
 * to: how the webhook is called, its caBundle, the TLS Secret, the image, the opted-in namespaces.
 */
export interface SecretData {
  'tls.crt': string;
  'tls.key': string;
  'ca.crt'?: string;
}

export type NamespaceState = 'labelled' | 'unlabelled' | 'missing';

export interface Installed {
  /** The origin the webhooks are called at, when the install is a --webhook-url one. */
  webhookUrl?: URL;
  /** The webhooks call the in-cluster Service. */
  inCluster: boolean;
  /** The first webhook's caBundle (base64), as the API server uses it. */
  caBundle?: string;
  secret?: SecretData;
  image?: string;
  /** The gateway (manifests/gateway) is installed: its Deployment exists. */
  gateway: boolean;
  /** Its Deployment serves Gateway API (--gateway-api=true in its args). */
  gatewayApi: boolean;
  /** Its Deployment is a mesh client (--mtls=on in its args). */
  gatewayMtls: boolean;
  /** The identity issuer (manifests/identity) is installed: its Deployment exists. */
  identity: boolean;
  /** Secret outrigger-identity-ca, the issuer's CA, made by install or brought by the user. */
  meshCa?: InstalledMeshCa;
  /** The webhook injects pods with mesh routes on by default (--mesh-routes=true in its args). */
  meshRoutes: boolean;
  optedIn: string[];
  /** Namespaces an install-made binding already grants the sidecar role. */
  bound: string[];
  named: Map<string, NamespaceState>;
}

const WHY = 'install reads the current install to keep its certificate and the way the webhook is called';

/** GET that answers undefined for 404 and fails for anything but 200. */
async function read(api: KubeApi, path: string, what: string): Promise<unknown> {
  const r = await api.call('GET', path);
  if (r.status === 404) return undefined;
  if (r.status !== 200)
    throw new OutriggerError(
      r.status === 401 ? 'kube_unauthorized' : 'kube_forbidden',
      `reading ${what} answered ${r.status}; ${WHY}, so run it as a user who may read it`,
    );
  return r.body;
}

interface WebhookConfig {
  webhooks?: { clientConfig?: { url?: string; caBundle?: string; service?: unknown } }[];
}

interface Deployment {
  spec?: { template?: { spec?: { containers?: { name: string; image?: string; args?: string[] }[] } } };
}

type SecretObject = { metadata?: { labels?: Record<string, string> }; data?: Partial<SecretData> };

export async function readInstalled(api: KubeApi, named: string[]): Promise<Installed> {
  const { namespace, tlsSecret, service, webhookConfiguration, identity } = CONTROL_PLANE;
  const [config, secret, deployment, gateway, optedIn, bindings, issuer, meshCa] = await Promise.all([
    read(
      api,
      `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${webhookConfiguration}`,
      `MutatingWebhookConfiguration ${webhookConfiguration}`,
    ) as Promise<WebhookConfig | undefined>,
    read(
      api,
      `/api/v1/namespaces/${namespace}/secrets/${tlsSecret}`,
      `Secret ${namespace}/${tlsSecret}`,
    ) as Promise<SecretObject | undefined>,
    read(
      api,
      `/apis/apps/v1/namespaces/${namespace}/deployments/${service}`,
      `Deployment ${namespace}/${service}`,
    ) as Promise<Deployment | undefined>,
    read(
      api,
      `/apis/apps/v1/namespaces/${CONTROL_PLANE.gateway.namespace}/deployments/${CONTROL_PLANE.gateway.deployment}`,
      `Deployment ${CONTROL_PLANE.gateway.namespace}/${CONTROL_PLANE.gateway.deployment}`,
    ),
    read(
      api,
      `/api/v1/namespaces?labelSelector=${encodeURIComponent(`${INJECTION_LABEL}=enabled`)}`,
      'the opted-in namespaces',
    ) as Promise<{ items?: { metadata: { name: string } }[] } | undefined>,
    read(
      api,
      `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings?labelSelector=${encodeURIComponent('app.kubernetes.io/name=outrigger')}`,
      'the ClusterRoleBindings',
    ) as Promise<{ items?: Binding[] } | undefined>,
    read(
      api,
      `/apis/apps/v1/namespaces/${namespace}/deployments/${identity.deployment}`,
      `Deployment ${namespace}/${identity.deployment}`,
    ),
    read(
      api,
      `/api/v1/namespaces/${namespace}/secrets/${identity.caSecret}`,
      `Secret ${namespace}/${identity.caSecret}`,
    ) as Promise<SecretObject | undefined>,
  ]);
  const client = config?.webhooks?.[0]?.clientConfig;
  const data = secretData(secret);
  const caData = secretData(meshCa);
  const states = await Promise.all(named.map((ns) => namespaceState(api, ns)));
  return {
    ...(client?.url ? { webhookUrl: new URL(new URL(client.url).origin) } : {}),
    inCluster: client?.service !== undefined,
    ...(client?.caBundle ? { caBundle: client.caBundle } : {}),
    ...(data ? { secret: data } : {}),
    identity: issuer !== undefined,
    ...(caData ? { meshCa: { data: caData, owned: madeByInstall(meshCa) } } : {}),
    ...imageOf(deployment),
    gateway: gateway !== undefined,
    gatewayApi: hasArg(gateway as Deployment | undefined, CONTROL_PLANE.gateway.gatewayApiArg),
    gatewayMtls: hasArg(gateway as Deployment | undefined, CONTROL_PLANE.gateway.mtlsArg),
    meshRoutes: hasArg(deployment, CONTROL_PLANE.meshRoutesArg),
    optedIn: (optedIn?.items ?? []).map((n) => n.metadata.name),
    bound: boundNamespaces(bindings?.items ?? []),
    named: new Map(named.map((ns, i) => [ns, states[i] ?? 'missing'])),
  };
}

/** A Secret's certificate and key; undefined unless it has both. */
function secretData(s: SecretObject | undefined): SecretData | undefined {
  const d = s?.data;
  return d?.['tls.crt'] && d['tls.key']
    ? { 'tls.crt': d['tls.crt'], 'tls.key': d['tls.key'], 'ca.crt': d['ca.crt'] }
    : undefined;
}

interface Binding {
  roleRef?: { kind?: string; name?: string };
  subjects?: { kind?: string; name?: string }[];
}

function boundNamespaces(bindings: Binding[]): string[] {
  const prefix = 'system:serviceaccounts:';
  return bindings
    .filter((b) => b.roleRef?.kind === 'ClusterRole' && b.roleRef.name === CONTROL_PLANE.sidecarRole)
    .flatMap((b) => b.subjects ?? [])
    .filter((s) => s.kind === 'Group' && s.name?.startsWith(prefix))
    .map((s) => (s.name ?? '').slice(prefix.length));
}

function hasArg(d: Deployment | undefined, arg: string): boolean {
  return (d?.spec?.template?.spec?.containers ?? []).some((c) => c.args?.includes(arg));
}

function imageOf(d: Deployment | undefined): { image?: string } {
  const image = d?.spec?.template?.spec?.containers?.find((c) => c.name === 'webhook')?.image;
  return image ? { image } : {};
}

async function namespaceState(api: KubeApi, name: string): Promise<NamespaceState> {
  const ns = (await read(api, `/api/v1/namespaces/${name}`, `namespace ${name}`)) as
    { metadata?: { labels?: Record<string, string> } } | undefined;
  if (!ns) return 'missing';
  return ns.metadata?.labels?.[INJECTION_LABEL] === 'enabled' ? 'labelled' : 'unlabelled';
}
