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

export async function renderInstall(flags: InstallFlags, note: (s: string) => void): Promise<string> {
  const { parseAllDocuments, stringify } = await import('yaml');
  const { makeCa, issueServing } = await import('./pki.ts');
  const parse = (text: string): unknown[] => parseAllDocuments(text).map((d) => d.toJS() as unknown);
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
  let meshed: string[];
  let newNamespaces: string[] = [];
  if (flags.namespaces !== undefined) {
    meshed = flags.namespaces
      .split(',')
      .map((n) => n.trim())
      .filter((n) => n !== '');
    const bad = meshed.find((n) => !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(n));
    if (bad !== undefined)
      throw new OutriggerError(
        'config_invalid',
        `invalid flag --namespaces: ${JSON.stringify(bad)} is not a namespace name (RFC 1123 label)`,
      );
    newNamespaces = meshed;
  } else {
    const kubeconfig = flags.kubeconfig ?? defaultKubeconfig();
    meshed = kubeconfig ? await optedInNamespaces(kubeconfig) : [];
    if (meshed.length === 0)
      note(
        'outrigger install: no namespace is opted in yet, so no sidecar RBAC is included; name them with --namespaces NS[,NS]',
      );
  }

  const now = Date.now();
  const ca = makeCa('outrigger-webhook-ca', {
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 3 * days * 86_400_000),
  });
  const { service, namespace } = CONTROL_PLANE;
  const sans = webhookUrl
    ? [webhookUrl.hostname.replace(/^\[|\]$/g, '')]
    : [
        `${service}.${namespace}.svc`,
        service,
        `${service}.${namespace}`,
        `${service}.${namespace}.svc.cluster.local`,
      ];
  const serving = issueServing(ca, sans, {
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + days * 86_400_000),
  });
  const caBundle = Buffer.from(ca.certPem).toString('base64');

  const out: Obj[] = [];
  for (const obj of shippedManifests(parse)) {
    // The shipped binding is an example for the namespace "demo"; install binds the meshed ones.
    if (obj.kind === 'ClusterRoleBinding' && obj.metadata.name === 'outrigger-sidecar-demo') continue;
    // A webhook called by URL runs outside the cluster: no Deployment, Service or budget for it.
    if (webhookUrl && ['Deployment', 'Service', 'PodDisruptionBudget'].includes(obj.kind)) continue;
    if (obj.kind === 'Deployment' && image) setImage(obj, image);
    if (obj.kind === 'MutatingWebhookConfiguration') setClientConfig(obj, caBundle, webhookUrl);
    out.push(obj);
    if (obj.kind === 'Namespace' && obj.metadata.name === namespace)
      out.push({
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'kubernetes.io/tls',
        metadata: {
          name: CONTROL_PLANE.tlsSecret,
          namespace,
          labels: { 'app.kubernetes.io/name': 'outrigger' },
        },
        data: {
          'tls.crt': Buffer.from(serving.certPem).toString('base64'),
          'tls.key': Buffer.from(serving.keyPem).toString('base64'),
          'ca.crt': caBundle,
        },
      });
  }
  const namespaces = newNamespaces.map((name) => ({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name, labels: { [INJECTION_LABEL]: 'enabled' } },
  }));
  // The webhook configuration goes last: once it exists, pods of opted-in namespaces need the webhook.
  const last = out.filter((o) => o.kind === 'MutatingWebhookConfiguration');
  const ordered = [
    ...namespaces,
    ...out.filter((o) => !last.includes(o)),
    ...meshed.map(sidecarBinding),
    ...last,
  ];
  const header = `# Outrigger control plane, generated by outrigger install. Apply with: kubectl apply -f -\n# Webhook serving certificate valid until ${serving.cert.validTo}; re-run to rotate (a new CA each time).\n`;
  return header + ordered.map((o) => stringify(o, { lineWidth: 0 })).join('---\n');
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
