import type { KubeApi } from './kube-api.ts';
import { OPTED_IN, fail, pass, warn, type CheckResult } from './check-result.ts';
import { CONTROL_PLANE } from './control-plane.ts';

/** The meshed namespaces' side of `outrigger check`: Pod Security level and the sidecar's RBAC. */
type Obj = { metadata: { name: string; labels?: Record<string, string> } } & Record<string, unknown>;

const SIDECAR_NEEDS = [
  { group: '', resource: 'services' },
  { group: 'discovery.k8s.io', resource: 'endpointslices' },
].flatMap((r) => ['list', 'watch'].map((verb) => ({ ...r, verb })));

export async function namespaceChecks(api: KubeApi): Promise<CheckResult[]> {
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
    out.push(await sidecarRbac(api, ns.name));
  }
  return out;
}

/** Whether the ServiceAccounts of namespace may do what the sidecar does, asked with a SubjectAccessReview. */
async function sidecarRbac(api: KubeApi, namespace: string): Promise<CheckResult> {
  const check = `sidecar RBAC ${namespace}`;
  const denied: string[] = [];
  for (const need of SIDECAR_NEEDS) {
    const r = await api.call('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: `system:serviceaccount:${namespace}:default`,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
        resourceAttributes: { verb: need.verb, group: need.group, resource: need.resource },
      },
    });
    if (r.status !== 201 && r.status !== 200)
      return fail(
        check,
        `asking the API server answered ${r.status}`,
        'run check as a user who may create subjectaccessreviews',
      );
    if (!(r.body as { status?: { allowed?: boolean } }).status?.allowed)
      denied.push(`${need.verb} ${need.resource}`);
  }
  return denied.length === 0
    ? pass(check, 'its ServiceAccounts may list and watch Services and EndpointSlices')
    : fail(
        check,
        `its ServiceAccounts may not ${denied.join(', ')}: sidecars there cannot discover Services`,
        `outrigger install --namespaces ${namespace} | kubectl apply -f -   (or: kubectl create clusterrolebinding ${CONTROL_PLANE.sidecarRole}-${namespace} --clusterrole=${CONTROL_PLANE.sidecarRole} --group=system:serviceaccounts:${namespace})`,
      );
}
