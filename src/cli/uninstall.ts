import { Command } from 'commander';
import { INJECTION_LABEL } from '../config/options.ts';
import { OutriggerError } from '../shared/errors.ts';
import {
  uninstallOptions,
  type UninstallConfig,
  type UninstallOptionName,
} from '../config/install-options.ts';
import { defaultKubeconfig } from './common.ts';
import { CONTROL_PLANE, madeByInstall } from './control-plane.ts';
import { personTable } from './option-table.ts';
import type { Obj } from './install-manifests.ts';
import type { KubeApi } from './kube-api.ts';

/**
 * `outrigger uninstall`: what `install` made, for `kubectl delete -f -`, as names only (no
 * Secret data), the identity issuer and its mesh CA included. The webhook configuration goes first, so no pod creation is sent to a webhook
 * that is already gone, and the sidecar-required policy right after it, so pods of a namespace
 * still labelled are admitted without a sidecar. Never a user's namespace: their injection label
 * is removed by the commands printed on stderr.
 */
type UninstallFlags = UninstallConfig;

type Note = (s: string) => void;

type Ref = Pick<Obj, 'apiVersion' | 'kind' | 'metadata'>;

const ref = (o: Obj): Ref => ({
  apiVersion: o.apiVersion,
  kind: o.kind,
  metadata: { name: o.metadata.name, ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}) },
});

/** Deletion order: admission first, then what install made last-to-first, its namespace at the very end. */
const FIRST = [
  'MutatingWebhookConfiguration',
  'ValidatingAdmissionPolicyBinding',
  'ValidatingAdmissionPolicy',
];

async function staticRefs(): Promise<Ref[]> {
  const m = await import('./install-manifests.ts');
  const made = [
    ...m.shippedManifests(),
    ...m.identityManifests(),
    ...m.gatewayManifests(),
    ...m.gatewayApiManifests(),
  ].filter((o) => !(o.kind === 'ClusterRoleBinding' && o.metadata.name === m.EXAMPLE_BINDING));
  const owned = [...made, m.TLS_SECRET, m.MESH_CA_SECRET, m.TRUST_BUNDLE].map(ref);
  const rank = (r: Ref): number => {
    const i = FIRST.indexOf(r.kind);
    if (i >= 0) return i;
    return r.kind === 'Namespace' ? FIRST.length + 2 : FIRST.length + 1;
  };
  // Within a rank, reverse install order: the Secret and workloads before their namespace.
  return owned
    .map((r, i) => ({ r, i }))
    .sort((a, b) => rank(a.r) - rank(b.r) || b.i - a.i)
    .map((x) => x.r);
}

interface Found {
  refs: Ref[];
  bindings: Ref[];
  labelled: string[];
}

interface Listed {
  metadata: {
    name: string;
    labels?: Record<string, string>;
    deletionTimestamp?: string;
  };
  roleRef?: { kind: string; name: string };
}

const mayBeUsers = (r: Ref): boolean =>
  r.kind === 'Namespace' ||
  ([CONTROL_PLANE.identity.caSecret, CONTROL_PLANE.identity.trustBundle] as string[]).includes(
    r.metadata.name,
  );

/** What of it exists in the cluster: objects being deleted already are left out. */
const BINDING_API = 'rbac.authorization.k8s.io/v1';

async function inCluster(api: KubeApi, refs: Ref[], note: Note): Promise<Found> {
  const m = await import('./install-manifests.ts');
  const present = await Promise.all(
    refs.map(async (r) => {
      const res = await api.call('GET', m.objectPath(r));
      const o = res.body as Listed;
      if (res.status !== 200 || o.metadata.deletionTimestamp) return false;
      // A namespace, or a mesh CA of the user's own (scripts/gen-mesh-ca), of the same name.
      if (mayBeUsers(r) && !madeByInstall(o)) {
        note(
          `${r.kind} ${r.metadata.namespace ? `${r.metadata.namespace}/` : ''}${r.metadata.name} has no ${m.OWNED_LABEL.key}=${m.OWNED_LABEL.value} label, so install did not make it: not deleting it`,
        );
        return false;
      }
      return true;
    }),
  );
  const bindings = await list(api, `/apis/${BINDING_API}/clusterrolebindings`);
  const toRole = bindings.filter(
    (b) => b.roleRef?.kind === 'ClusterRole' && b.roleRef.name === CONTROL_PLANE.sidecarRole,
  );
  for (const b of toRole.filter((b) => !madeByInstall(b)))
    note(
      `ClusterRoleBinding ${b.metadata.name} binds ${CONTROL_PLANE.sidecarRole} but install did not make it (no ${m.OWNED_LABEL.key}=${m.OWNED_LABEL.value} label): delete it yourself with kubectl delete clusterrolebinding ${b.metadata.name}`,
    );
  await tellTrustBundles(api, refs, note);
  const selector = encodeURIComponent(`${INJECTION_LABEL}=enabled`);
  const labelled = (await list(api, `/api/v1/namespaces?labelSelector=${selector}`)).map(
    (n) => n.metadata.name,
  );
  return {
    refs: refs.filter((_, i) => present[i]),
    bindings: toRole
      .filter((b) => madeByInstall(b) && !b.metadata.deletionTimestamp)
      .map((b) => ({
        apiVersion: BINDING_API,
        kind: 'ClusterRoleBinding',
        metadata: { name: b.metadata.name },
      })),
    labelled,
  };
}

/**
 * The trust bundles the issuer keeps in opted-in namespaces: it made them, not install, and they
 * are in namespaces of the user's, so they are told as commands rather than printed.
 */
async function tellTrustBundles(api: KubeApi, refs: Ref[], note: Note): Promise<void> {
  const { trustBundle } = CONTROL_PLANE.identity;
  const selector = encodeURIComponent('app.kubernetes.io/managed-by=outrigger-identity');
  const listed = (await list(api, `/api/v1/configmaps?labelSelector=${selector}`)) as (Listed & {
    metadata: { namespace?: string };
  })[];
  const printed = new Set(refs.filter((r) => r.kind === 'ConfigMap').map((r) => r.metadata.namespace));
  const namespaces = listed
    .filter((c) => c.metadata.name === trustBundle && !printed.has(c.metadata.namespace))
    .map((c) => c.metadata.namespace ?? '');
  if (namespaces.length > 0)
    note(
      `the identity issuer keeps its trust bundle in your namespaces; after deleting, remove it with\n${namespaces
        .map((ns) => `  kubectl -n ${ns} delete configmap ${trustBundle}`)
        .join('\n')}`,
    );
}

async function list(api: KubeApi, path: string): Promise<Listed[]> {
  const r = await api.call('GET', path);
  if (r.status !== 200)
    throw new OutriggerError(
      r.status === 401 ? 'kube_unauthorized' : 'kube_forbidden',
      `GET ${path} answered ${r.status}; uninstall reads what to delete, so run it as a user who may list it`,
    );
  return (r.body as { items?: Listed[] }).items ?? [];
}

export async function renderUninstall(flags: UninstallFlags, note: Note): Promise<string> {
  const m = await import('./install-manifests.ts');
  const named = flags.namespaces === undefined ? [] : m.parseNamespaces(flags.namespaces);
  const refs = await staticRefs();
  const kubeconfig = flags.kubeconfig ?? defaultKubeconfig();
  let found: Found;
  if (kubeconfig) {
    const { openKubeApi, apiVersion } = await import('./kube-api.ts');
    const api = await openKubeApi(kubeconfig);
    await apiVersion(api);
    found = await inCluster(api, refs, note);
  } else {
    note(
      'no kubeconfig, so this lists every object install can make, found or not: delete with kubectl delete --ignore-not-found -f -' +
        (named.length
          ? ''
          : '; name the meshed namespaces with --namespaces to include their sidecar bindings'),
    );
    found = { refs, bindings: named.map((n) => ref(m.sidecarBinding(n))), labelled: named };
  }
  // The sidecar bindings go after the admission objects and before the rest.
  const ordered = [
    ...found.refs.filter((r) => FIRST.includes(r.kind)),
    ...found.bindings,
    ...found.refs.filter((r) => !FIRST.includes(r.kind)),
  ];
  tellLabels(found.labelled, note);
  if (ordered.length === 0) {
    note('nothing to delete: no object install makes is in the cluster');
    return '';
  }
  return (
    `# Outrigger control plane, listed by outrigger uninstall. Delete with: kubectl delete ${kubeconfig ? '' : '--ignore-not-found '}-f -\n` +
    m.yamlStream(ordered)
  );
}

function tellLabels(labelled: string[], note: Note): void {
  if (labelled.length === 0) return;
  note(
    `namespaces stay yours: after deleting, remove their injection label with\n${labelled
      .map((ns) => `  kubectl label namespace ${ns} ${INJECTION_LABEL}-`)
      .join(
        '\n',
      )}\npods injected so far keep their sidecar until they are re-created (kubectl -n NS rollout restart deployment)`,
  );
}

export function uninstallCommand(): Command {
  const cmd = new Command('uninstall').description(
    'print what install made, webhook configuration first, for kubectl delete -f -; never your namespaces (the commands that remove their injection label go to stderr)',
  );
  return personTable<UninstallOptionName, UninstallConfig>(cmd, uninstallOptions, async (flags) => {
    process.stdout.write(
      await renderUninstall(flags, (s) => process.stderr.write(`outrigger uninstall: ${s}\n`)),
    );
  });
}
