import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { intRange, nonEmpty, parseValue, url as urlParser } from '../config/parse.ts';
import { INJECTION_LABEL } from '../config/options.ts';
import { OutriggerError } from '../shared/errors.ts';
import { KUBECONFIG_HELP, defaultKubeconfig } from './common.ts';
import { CONTROL_PLANE } from './control-plane.ts';

/**
 * `outrigger install`: the control plane as one YAML stream for `kubectl apply -f -`, like
 * `linkerd install`. It is the shipped manifests/ (what `kubectl apply -k` installs) plus what
 * kustomize cannot make: a fresh webhook CA and serving certificate (the TLS Secret and the
 * matching caBundle), the image, and the sidecar RBAC of the meshed namespaces.
 */
interface InstallFlags {
  image?: string;
  namespaces?: string;
  webhookUrl?: string;
  certDays: string;
  kubeconfig?: string;
}

type Obj = Record<string, unknown> & {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
};

const MANIFESTS = fileURLToPath(new URL('../../manifests/', import.meta.url));

/** manifests/kustomization.yaml's resources, depth first, as kubectl kustomize lists them. */
function shippedManifests(parse: (text: string) => unknown[], dir = MANIFESTS): Obj[] {
  const kustomization = parse(readFileSync(`${dir}kustomization.yaml`, 'utf8'))[0] as { resources: string[] };
  return kustomization.resources.flatMap((r) =>
    r.endsWith('.yaml')
      ? (parse(readFileSync(`${dir}${r}`, 'utf8')) as Obj[])
      : shippedManifests(parse, `${dir}${r}/`),
  );
}

export function sidecarBinding(namespace: string): Obj {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: {
      name: `${CONTROL_PLANE.sidecarRole}-${namespace}`,
      labels: { 'app.kubernetes.io/name': 'outrigger' },
    },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: CONTROL_PLANE.sidecarRole },
    subjects: [
      { kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: `system:serviceaccounts:${namespace}` },
    ],
  };
}

async function optedInNamespaces(kubeconfig: string): Promise<string[]> {
  const { openKubeApi, apiVersion } = await import('./kube-api.ts');
  const api = await openKubeApi(kubeconfig);
  await apiVersion(api);
  const r = await api.call(
    'GET',
    `/api/v1/namespaces?labelSelector=${encodeURIComponent(`${INJECTION_LABEL}=enabled`)}`,
  );
  if (r.status !== 200)
    throw new OutriggerError(
      'kube_forbidden',
      `cannot list the opted-in namespaces (${r.status}); pass them with --namespaces NS[,NS]`,
    );
  return ((r.body as { items?: Obj[] }).items ?? []).map((n) => n.metadata.name);
}

interface Parsed {
  days: number;
  image: string | undefined;
  webhookUrl: URL | undefined;
}

function parseFlags(flags: InstallFlags): Parsed {
  const days = parseValue(intRange(1, 3650), '--cert-days', flags.certDays, 'flag');
  const image = flags.image === undefined ? undefined : parseValue(nonEmpty, '--image', flags.image, 'flag');
  const webhookUrl =
    flags.webhookUrl === undefined
      ? undefined
      : new URL(parseValue(urlParser, '--webhook-url', flags.webhookUrl, 'flag'));
  if (webhookUrl && webhookUrl.protocol !== 'https:')
    throw new OutriggerError(
      'config_invalid',
      `invalid flag --webhook-url=${JSON.stringify(flags.webhookUrl)}: expected an https:// URL`,
    );
  return { days, image, webhookUrl };
}

/** The namespaces to bind, and which of them this install also creates and labels. */
async function meshedNamespaces(
  flags: InstallFlags,
  note: (s: string) => void,
): Promise<{ meshed: string[]; created: string[] }> {
  if (flags.namespaces !== undefined) {
    const named = flags.namespaces
      .split(',')
      .map((n) => n.trim())
      .filter((n) => n !== '');
    const bad = named.find((n) => !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(n));
    if (bad !== undefined)
      throw new OutriggerError(
        'config_invalid',
        `invalid flag --namespaces: ${JSON.stringify(bad)} is not a namespace name (RFC 1123 label)`,
      );
    return { meshed: named, created: named };
  }
  const kubeconfig = flags.kubeconfig ?? defaultKubeconfig();
  const meshed = kubeconfig ? await optedInNamespaces(kubeconfig) : [];
  if (meshed.length === 0)
    note(
      'outrigger install: no namespace is opted in yet, so no sidecar RBAC is included; name them with --namespaces NS[,NS]',
    );
  return { meshed, created: [] };
}

/** A new CA (3x the serving lifetime) and serving certificate; the Secret and the caBundle. */
async function webhookTls(p: Parsed): Promise<{ secret: Obj; caBundle: string; validTo: string }> {
  const { makeCa, issueServing } = await import('./pki.ts');
  const now = Date.now();
  // A minute of slack for clocks that run behind this one.
  const from = new Date(now - 60_000);
  const ca = makeCa('outrigger-webhook-ca', {
    notBefore: from,
    notAfter: new Date(now + 3 * p.days * DAY_MS),
  });
  const { service, namespace, tlsSecret } = CONTROL_PLANE;
  const sans = p.webhookUrl
    ? [p.webhookUrl.hostname.replace(/^\[|\]$/g, '')]
    : [
        `${service}.${namespace}.svc`,
        service,
        `${service}.${namespace}`,
        `${service}.${namespace}.svc.cluster.local`,
      ];
  const serving = issueServing(ca, sans, { notBefore: from, notAfter: new Date(now + p.days * DAY_MS) });
  const caBundle = Buffer.from(ca.certPem).toString('base64');
  const secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'kubernetes.io/tls',
    metadata: { name: tlsSecret, namespace, labels: { 'app.kubernetes.io/name': 'outrigger' } },
    data: {
      'tls.crt': Buffer.from(serving.certPem).toString('base64'),
      'tls.key': Buffer.from(serving.keyPem).toString('base64'),
      'ca.crt': caBundle,
    },
  } as Obj;
  return { secret, caBundle, validTo: serving.cert.validTo };
}

const DAY_MS = 86_400_000;

export async function renderInstall(flags: InstallFlags, note: (s: string) => void): Promise<string> {
  const { parseAllDocuments, stringify } = await import('yaml');
  const parse = (text: string): unknown[] => parseAllDocuments(text).map((d) => d.toJS() as unknown);
  const p = parseFlags(flags);
  const { meshed, created } = await meshedNamespaces(flags, note);
  const tls = await webhookTls(p);
  const out: Obj[] = created.map((name) => ({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name, labels: { [INJECTION_LABEL]: 'enabled' } },
  }));
  let config: Obj | undefined;
  for (const obj of shippedManifests(parse)) {
    // The shipped binding is an example for the namespace "demo"; install binds the meshed ones.
    if (obj.kind === 'ClusterRoleBinding' && obj.metadata.name === 'outrigger-sidecar-demo') continue;
    // A webhook called by URL runs outside the cluster: no Deployment, Service or budget for it.
    if (p.webhookUrl && ['Deployment', 'Service', 'PodDisruptionBudget'].includes(obj.kind)) continue;
    if (obj.kind === 'Deployment' && p.image) setImage(obj, p.image);
    if (obj.kind === 'MutatingWebhookConfiguration') {
      // Last: once it exists, creating a pod in an opted-in namespace needs the webhook.
      setClientConfig(obj, tls.caBundle, p.webhookUrl);
      config = obj;
      continue;
    }
    out.push(obj);
    if (obj.kind === 'Namespace' && obj.metadata.name === CONTROL_PLANE.namespace) out.push(tls.secret);
  }
  out.push(...meshed.map(sidecarBinding), ...(config ? [config] : []));
  const header =
    '# Outrigger control plane, generated by outrigger install. Apply with: kubectl apply -f -\n' +
    `# Webhook serving certificate valid until ${tls.validTo}; re-run to rotate (a new CA each time).\n`;
  return header + out.map((o) => stringify(o, { lineWidth: 0 })).join('---\n');
}

function setImage(deployment: Obj, image: string): void {
  const spec = deployment.spec as {
    template: { spec: { containers: { image: string; env?: { name: string; value?: string }[] }[] } };
  };
  for (const c of spec.template.spec.containers) {
    c.image = image;
    // The injected sidecar runs the same image as the webhook that injects it.
    for (const e of c.env ?? []) if (e.name === 'OUTRIGGER_PROXY_IMAGE') e.value = image;
  }
}

function setClientConfig(config: Obj, caBundle: string, webhookUrl: URL | undefined): void {
  const webhooks = config.webhooks as {
    clientConfig: { service?: { path?: string }; url?: string; caBundle?: string };
  }[];
  for (const w of webhooks) {
    const path = w.clientConfig.service?.path ?? '/mutate';
    w.clientConfig = webhookUrl
      ? { url: new URL(path, webhookUrl).toString(), caBundle }
      : { ...w.clientConfig, caBundle };
  }
}

export function installCommand(): Command {
  return new Command('install')
    .description(
      'print the control-plane manifests (webhook with a fresh certificate, RBAC) for kubectl apply -f -',
    )
    .option(
      '--image <image>',
      'image of the webhook and of the injected sidecars (default: the one in manifests/)',
    )
    .option(
      '--namespaces <ns,...>',
      'namespaces to mesh: labelled for injection, their ServiceAccounts bound to the sidecar role (default: the opted-in ones, read with the kubeconfig)',
    )
    .option(
      '--webhook-url <url>',
      'call a webhook you run yourself at this https:// URL instead of the in-cluster Deployment',
    )
    .addOption(
      new Option(
        '--cert-days <days>',
        'serving certificate lifetime in days, 1 to 3650 (the CA lives 3 times as long)',
      ).default('365'),
    )
    .option('--kubeconfig <path>', KUBECONFIG_HELP)
    .action(async (flags: InstallFlags) => {
      process.stdout.write(await renderInstall(flags, (s) => process.stderr.write(s + '\n')));
    });
}
