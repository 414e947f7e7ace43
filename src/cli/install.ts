import { Command } from 'commander';
import { installOptions, type InstallConfig, type InstallOptionName } from '../config/install-options.ts';
import { INJECTION_LABEL } from '../config/options.ts';
import { OutriggerError } from '../shared/errors.ts';
import { defaultKubeconfig } from './common.ts';
import { CONTROL_PLANE } from './control-plane.ts';
import { personTable } from './option-table.ts';
import type { Obj } from './install-manifests.ts';
import type { Installed } from './install-state.ts';

/**
 * `outrigger install`: the control plane as one YAML stream for `kubectl apply -f -`, like
 * `linkerd install`. It is the shipped manifests/ (what `kubectl apply -k` installs) plus what
 * kustomize cannot make: the webhook CA and serving certificate (the TLS Secret and the matching
 * caBundle), the image, the sidecar RBAC of the meshed namespaces, and with --identity the mesh CA
 * (install-mesh-ca.ts).
 *
 * It prints only objects it owns, never a user's namespace, so `kubectl delete -f -` of its output
 * cannot delete an application; the namespaces to opt in are told on stderr as kubectl commands.
 * With a kubeconfig it reads the current install first and keeps what it was not asked to
 * change: the certificate and caBundle, a --webhook-url, the image, the gateway, the issuer and
 * its CA. A re-run is an upgrade.
 */
export type InstallFlags = InstallConfig;

interface Parsed {
  days: number;
  image: string | undefined;
  webhookUrl: URL | undefined;
  named: string[];
}

type Note = (s: string) => void;

async function parseFlags(flags: InstallFlags): Promise<Parsed> {
  const days = flags.certTtl / DAY_MS;
  const image = flags.image;
  const webhookUrl = flags.webhookUrl === undefined ? undefined : new URL(flags.webhookUrl);
  if (webhookUrl && webhookUrl.protocol !== 'https:')
    throw new OutriggerError(
      'config_invalid',
      `invalid flag --webhook-url=${JSON.stringify(flags.webhookUrl)}: expected an https:// URL`,
    );
  const { parseNamespaces } = await import('./install-manifests.ts');
  const named = flags.namespaces === undefined ? [] : parseNamespaces(flags.namespaces);
  return { days, image, webhookUrl, named };
}

/** The install in the cluster the kubeconfig reaches; undefined without a kubeconfig (a fresh render). */
async function currentInstall(
  flags: InstallFlags,
  named: string[],
  note: Note,
): Promise<Installed | undefined> {
  const kubeconfig = flags.kubeconfig ?? defaultKubeconfig();
  if (!kubeconfig) {
    note(
      'no kubeconfig, so this is a fresh install with a new CA; with one, install reads the current install and keeps its certificate and shape',
    );
    return undefined;
  }
  const [{ openKubeApi, apiVersion }, { readInstalled }] = await Promise.all([
    import('./kube-api.ts'),
    import('./install-state.ts'),
  ]);
  const api = await openKubeApi(kubeconfig);
  await apiVersion(api);
  return readInstalled(api, named);
}

/** Where the webhooks are called: the flag, else the installed URL (a re-run keeps the shape), else the Service. */
function webhookShape(
  flags: InstallFlags,
  p: Parsed,
  installed: Installed | undefined,
  note: Note,
): URL | undefined {
  if (p.webhookUrl) {
    if (installed?.inCluster)
      note(
        `the in-cluster webhook is no longer called; remove it with: kubectl -n ${CONTROL_PLANE.namespace} delete deployment,service,poddisruptionbudget ${CONTROL_PLANE.service}`,
      );
    return p.webhookUrl;
  }
  if (flags.inClusterWebhook || !installed?.webhookUrl) return undefined;
  note(
    `keeping the webhook URL ${installed.webhookUrl.origin} of the installed configuration (--in-cluster-webhook switches to the in-cluster Deployment)`,
  );
  return installed.webhookUrl;
}

function webhookNames(webhookUrl: URL | undefined): string[] {
  const { service, namespace } = CONTROL_PLANE;
  return webhookUrl
    ? [webhookUrl.hostname.replace(/^\[|\]$/g, '')]
    : [
        `${service}.${namespace}.svc`,
        service,
        `${service}.${namespace}`,
        `${service}.${namespace}.svc.cluster.local`,
      ];
}

/** The image: the flag, else the installed one (an upgrade names its image), else manifests/'. */
function chosenImage(
  p: Parsed,
  installed: Installed | undefined,
  shipped: string | undefined,
  note: Note,
): string | undefined {
  if (p.image) return p.image;
  if (installed?.image && installed.image !== shipped) {
    note(`keeping the installed image ${installed.image} (--image changes it)`);
    return installed.image;
  }
  return undefined;
}

/**
 * The namespaces to bind: those named, those opted in and those bound by an earlier run (so a
 * re-run prints the whole install); and, on stderr, the commands that opt the named ones in.
 */
function meshed(p: Parsed, installed: Installed | undefined, note: Note): string[] {
  const all = [...new Set([...p.named, ...(installed?.optedIn ?? []), ...(installed?.bound ?? [])])].sort();
  if (all.length === 0)
    note('no namespace is opted in yet, so no sidecar RBAC is included; name them with --namespaces NS[,NS]');
  const commands = p.named.flatMap((ns) => {
    const state = installed ? installed.named.get(ns) : undefined;
    const label = `kubectl label namespace ${ns} ${INJECTION_LABEL}=enabled`;
    if (state === 'labelled') return [];
    return state === 'missing' ? [`kubectl create namespace ${ns}`, label] : [label];
  });
  if (commands.length > 0)
    note(
      `namespaces stay yours (install never prints them, so deleting its output cannot delete them); after applying, opt them in with:\n${commands.map((c) => `  ${c}`).join('\n')}${installed ? '' : '\n(create a namespace first if it does not exist: kubectl create namespace NS)'}`,
    );
  return all;
}

export async function renderInstall(flags: InstallFlags, note: Note, now = Date.now()): Promise<string> {
  const p = await parseFlags(flags);
  const installed = await currentInstall(flags, p.named, note);
  const [m, { planWebhookTls }] = await Promise.all([
    import('./install-manifests.ts'),
    import('./install-tls.ts'),
  ]);
  const webhookUrl = webhookShape(flags, p, installed, note);
  const shipped = m.shippedManifests();
  const image = chosenImage(p, installed, shippedImage(shipped), note);
  const tls = planWebhookTls({
    ...(installed?.secret ? { existing: installed.secret } : {}),
    ...(installed?.caBundle ? { caBundle: installed.caBundle } : {}),
    sans: webhookNames(webhookUrl),
    rotate: flags.rotateCertificate === true,
    days: p.days,
    now,
  });
  if (installed?.secret)
    note(
      tls.issued
        ? `issuing a new webhook certificate (${tls.issued}); the previous CA stays in the caBundle until the next rotation, so the webhook is trusted while it reloads the Secret`
        : `keeping the webhook certificate of Secret ${CONTROL_PLANE.namespace}/${CONTROL_PLANE.tlsSecret} (valid until ${tls.validTo}; --rotate-certificate replaces it)`,
    );
  const namespaces = meshed(p, installed, note);
  const gatewayApi = flags.gatewayApi === true || installed?.gatewayApi === true;
  if (installed?.gatewayApi && !flags.gatewayApi) note('keeping Gateway API on the installed gateway');
  else if (installed?.gateway && !flags.gateway) note('keeping the installed gateway (manifests/gateway)');
  if (gatewayApi)
    note(
      'the gateway serves Gateway API: it needs the standard-channel CRDs of sigs.k8s.io/gateway-api v1.6 (kubectl apply --server-side -f standard-install.yaml from its release) before this output is applied',
    );
  const identity = await identityPart(flags, installed, now, note);
  const gatewayMtls = flags.gatewayMtls === true || installed?.gatewayMtls === true;
  if (installed?.gatewayMtls && !flags.gatewayMtls) note('keeping mutual TLS on the installed gateway');
  if (gatewayMtls)
    note(
      `the gateway is a mesh client: its certificate comes from outrigger identity${identity.installed ? '' : ' (install --identity adds it)'}, and it is not ready until it holds one`,
    );
  const meshRoutes = flags.meshRoutes === true || installed?.meshRoutes === true;
  if (installed?.meshRoutes && !flags.meshRoutes) note('keeping mesh routes on by default for injected pods');
  if (meshRoutes)
    note(
      webhookUrl
        ? `mesh routes by default: give the webhook you run at ${webhookUrl.origin} the flag ${CONTROL_PLANE.meshRoutesArg}`
        : 'injected pods apply HTTPRoutes attached to Services unless they set outrigger.dev/mesh-routes: "false"; the sidecars need the standard-channel CRDs of sigs.k8s.io/gateway-api',
    );
  const gateway =
    flags.gateway || installed?.gateway || gatewayApi || gatewayMtls ? m.gatewayManifests() : [];
  const out = assemble(
    [...shipped, ...identity.objects, ...gateway, ...(gatewayApi ? m.gatewayApiManifests() : [])],
    {
      gatewayApi,
      gatewayMtls,
      meshRoutes,
      secrets: [{ ...m.TLS_SECRET, type: 'kubernetes.io/tls', data: tls.data }, ...identity.secrets],
      bindings: namespaces.map(m.sidecarBinding),
      example: m.EXAMPLE_BINDING,
      caBundle: tls.caBundle,
      webhookUrl,
      image,
    },
  );
  const header =
    '# Outrigger control plane, generated by outrigger install. Apply with: kubectl apply -f -\n' +
    '# Remove with: outrigger uninstall | kubectl delete -f -\n' +
    `# Webhook serving certificate valid until ${tls.validTo}; ${tls.issued ? 'new in this run' : 'kept from the cluster'} (--rotate-certificate replaces it).\n`;
  return header + m.yamlStream(out);
}

interface IdentityPart {
  installed: boolean;
  /** manifests/identity. */
  objects: Obj[];
  /** The mesh CA's Secret and trust bundle, printed after their namespace. */
  secrets: Obj[];
}

/** --identity, or an installed issuer (a re-run keeps it): manifests/identity and its mesh CA. */
async function identityPart(
  flags: InstallFlags,
  installed: Installed | undefined,
  now: number,
  note: Note,
): Promise<IdentityPart> {
  if (!flags.identity && !installed?.identity) return { installed: false, objects: [], secrets: [] };
  if (!flags.identity) note('keeping the installed identity issuer (manifests/identity)');
  const [m, { planMeshCa }] = await Promise.all([
    import('./install-manifests.ts'),
    import('./install-mesh-ca.ts'),
  ]);
  const { namespace, identity } = CONTROL_PLANE;
  const ca = planMeshCa(installed?.meshCa, `${namespace}/${identity.caSecret}`, now);
  note(ca.note);
  const secrets = ca.print
    ? [
        { ...m.MESH_CA_SECRET, type: 'kubernetes.io/tls', data: ca.data },
        { ...m.TRUST_BUNDLE, data: { 'ca.crt': ca.bundle } },
      ]
    : [];
  return { installed: true, objects: m.identityManifests(), secrets };
}

/** manifests/ made into this install, in apply order: the Secret after its namespace, the webhook configuration last. */
function assemble(
  shipped: Obj[],
  o: {
    secrets: Obj[];
    bindings: Obj[];
    example: string;
    caBundle: string;
    webhookUrl?: URL;
    image?: string;
    gatewayApi: boolean;
    gatewayMtls: boolean;
    meshRoutes: boolean;
  },
): Obj[] {
  const out: Obj[] = [];
  let config: Obj | undefined;
  for (const obj of shipped) {
    if (obj.kind === 'ClusterRoleBinding' && obj.metadata.name === o.example) continue;
    // A webhook called by URL runs outside the cluster: no Deployment, Service or budget for it.
    if (
      o.webhookUrl &&
      obj.metadata.namespace === CONTROL_PLANE.namespace &&
      obj.metadata.name === CONTROL_PLANE.service &&
      ['Deployment', 'Service', 'PodDisruptionBudget'].includes(obj.kind)
    )
      continue;
    if (obj.kind === 'Deployment' && o.image) setImage(obj, o.image);
    const { deployment, gatewayApiArg, mtlsArg } = CONTROL_PLANE.gateway;
    const args: string[] = [...(o.gatewayApi ? [gatewayApiArg] : []), ...(o.gatewayMtls ? [mtlsArg] : [])];
    if (args.length > 0 && obj.kind === 'Deployment' && obj.metadata.name === deployment)
      for (const c of containersOf(obj))
        c.args = [...(c.args ?? []).filter((a) => !args.includes(a)), ...args];
    if (o.meshRoutes && obj.kind === 'Deployment' && obj.metadata.name === CONTROL_PLANE.service)
      for (const c of containersOf(obj))
        c.args = [
          ...(c.args ?? []).filter((a) => a !== CONTROL_PLANE.meshRoutesArg),
          CONTROL_PLANE.meshRoutesArg,
        ];
    if (obj.kind === 'MutatingWebhookConfiguration') {
      // Last: once it exists, creating a pod in an opted-in namespace needs the webhook.
      setClientConfig(obj, o.caBundle, o.webhookUrl);
      config = obj;
      continue;
    }
    out.push(obj);
    if (obj.kind === 'Namespace' && obj.metadata.name === CONTROL_PLANE.namespace) out.push(...o.secrets);
  }
  return [...out, ...o.bindings, ...(config ? [config] : [])];
}

type Containers = { image: string; args?: string[]; env?: { name: string; value?: string }[] }[];
const containersOf = (deployment: Obj): Containers =>
  (deployment.spec as { template: { spec: { containers: Containers } } }).template.spec.containers;

function shippedImage(shipped: Obj[]): string | undefined {
  const deployment = shipped.find((o) => o.kind === 'Deployment');
  return deployment ? containersOf(deployment)[0]?.image : undefined;
}

function setImage(deployment: Obj, image: string): void {
  for (const c of containersOf(deployment)) {
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

const DAY_MS = 86_400_000;

export function installCommand(): Command {
  const cmd = new Command('install').description(
    'print the control plane (webhook, its certificate, RBAC; the gateway with --gateway, the identity issuer with --identity) for kubectl apply -f -; re-run to upgrade: it keeps the installed certificates, webhook URL, image, gateway and issuer',
  );
  personTable<InstallOptionName, InstallConfig>(cmd, installOptions, async (flags) => {
    process.stdout.write(
      await renderInstall(flags, (s) => process.stderr.write(`outrigger install: ${s}\n`)),
    );
  });
  cmd.options.find((o) => o.long === '--webhook-url')?.conflicts('inClusterWebhook');
  return cmd;
}
