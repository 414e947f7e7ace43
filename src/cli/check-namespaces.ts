import type { KubeApi } from './kube-api.ts';
import { OPTED_IN, fail, pass, warn, type CheckResult } from './check-result.ts';
import { CONTROL_PLANE } from './control-plane.ts';
import { installKeeping, type Webhook } from './check-webhook.ts';

/** The meshed namespaces' side of `outrigger check`: Pod Security level and the sidecar's RBAC. */
type Obj = { metadata: { name: string; labels?: Record<string, string> } } & Record<string, unknown>;

const SIDECAR_NEEDS = [
  { group: '', resource: 'services' },
  { group: 'discovery.k8s.io', resource: 'endpointslices' },
].flatMap((r) => ['list', 'watch'].map((verb) => ({ ...r, verb })));

/** webhooks: the installed configuration's, so a fix keeps how it is called (undefined: not installed). */
export async function namespaceChecks(api: KubeApi, webhooks?: Webhook[]): Promise<CheckResult[]> {
  const r = await api.call('GET', `/api/v1/namespaces?labelSelector=${encodeURIComponent(OPTED_IN)}`);
  if (r.status !== 200)
    return [
      fail(
        'meshed namespaces',
        `listing namespaces answered ${r.status}`,
        'run check as a user who may list namespaces',
      ),
    ];
  const namespaces = ((r.body as { items?: Obj[] }).items ?? []).map((n) => n.metadata);
  if (namespaces.length === 0)
    return [
      warn(
        'meshed namespaces',
        'no namespace is opted in, so nothing is injected',
        `kubectl label namespace NS ${OPTED_IN}`,
      ),
    ];
  const out: CheckResult[] = [];
  for (const ns of namespaces) {
    const level = ns.labels?.['pod-security.kubernetes.io/enforce'] ?? 'privileged';
    const capture =
      level === 'privileged' ? 'transparent capture' : 'explicit capture (the level forbids NET_ADMIN)';
    out.push(pass(`namespace ${ns.name}`, `opted in; Pod Security ${level}: ${capture}`));
    out.push(await sidecarRbac(api, ns.name, webhooks));
  }
  return out;
}

/** Whether the ServiceAccounts of namespace may do what the sidecar does, asked with SubjectAccessReviews. */
async function sidecarRbac(api: KubeApi, namespace: string, webhooks?: Webhook[]): Promise<CheckResult> {
  const check = `sidecar RBAC ${namespace}`;
  const subject = serviceAccount(namespace, 'default');
  const answers = await Promise.all(SIDECAR_NEEDS.map((need) => subjectMay(api, subject, need)));
  if (answers.some((a) => a === undefined))
    return fail(check, 'the API server refused the SubjectAccessReview', ASK_AS_ADMIN);
  const denied = SIDECAR_NEEDS.filter((_, i) => !answers[i]).map((n) => `${n.verb} ${n.resource}`);
  return denied.length === 0
    ? pass(check, 'its ServiceAccounts may list and watch Services and EndpointSlices')
    : fail(
        check,
        `its ServiceAccounts may not ${denied.join(', ')}: sidecars there cannot discover Services`,
        `${installKeeping(webhooks, ` --namespaces ${namespace}`)}   (or: ${bindCommand(namespace)})`,
      );
}

/** The binding install makes, by hand; labelled like install's, so `outrigger uninstall` finds it. */
function bindCommand(namespace: string): string {
  const name = `${CONTROL_PLANE.sidecarRole}-${namespace}`;
  return `kubectl create clusterrolebinding ${name} --clusterrole=${CONTROL_PLANE.sidecarRole} --group=system:serviceaccounts:${namespace} && kubectl label clusterrolebinding ${name} app.kubernetes.io/name=outrigger`;
}

/**
 * The webhook needs no API access at all (its ServiceAccount mounts no token): anything it may
 * read, such as Secrets, is more than it should have.
 */
export async function webhookRbac(api: KubeApi): Promise<CheckResult> {
  const check = 'webhook RBAC';
  const subject = serviceAccount(CONTROL_PLANE.namespace, CONTROL_PLANE.service);
  const secrets = await subjectMay(api, subject, { verb: 'list', group: '', resource: 'secrets' });
  if (secrets === undefined)
    return fail(check, 'the API server refused the SubjectAccessReview', ASK_AS_ADMIN);
  return secrets
    ? warn(
        check,
        `ServiceAccount ${CONTROL_PLANE.namespace}/${CONTROL_PLANE.service} may list Secrets; the webhook needs no API access`,
        `kubectl get clusterrolebindings,rolebindings -A -o wide | grep ${CONTROL_PLANE.service}, and remove what binds it`,
      )
    : pass(
        check,
        `ServiceAccount ${CONTROL_PLANE.namespace}/${CONTROL_PLANE.service} has no access it does not need`,
      );
}

const ASK_AS_ADMIN = 'run check as a user who may create subjectaccessreviews';

interface Subject {
  user: string;
  groups: string[];
}

const serviceAccount = (namespace: string, name: string): Subject => ({
  user: `system:serviceaccount:${namespace}:${name}`,
  groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
});

/** A SubjectAccessReview, cluster-wide; undefined when the API server refuses to answer it. */
async function subjectMay(
  api: KubeApi,
  subject: Subject,
  attrs: { verb: string; group: string; resource: string },
): Promise<boolean | undefined> {
  const r = await api.call('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    spec: { ...subject, resourceAttributes: attrs },
  });
  if (r.status !== 201 && r.status !== 200) return undefined;
  return (r.body as { status?: { allowed?: boolean } }).status?.allowed === true;
}
