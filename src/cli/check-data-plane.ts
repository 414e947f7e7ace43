import { INJECT_ANNOTATION, INJECTION_LABEL, TRUST_BUNDLE_CONFIGMAP, options } from '../config/options.ts';
import { SIDECAR_NAME } from '../injector/containers.ts';
import { fail, pass, warn, type CheckResult } from './check-result.ts';
import { CONTROL_PLANE } from './control-plane.ts';
import type { KubeApi } from './kube-api.ts';

/**
 * The data plane's side of `outrigger check`, like istioctl analyze's NamespaceNotInjected and
 * PodMissingProxy: namespaces that almost opted in, pods running without their sidecar, and strict
 * mutual TLS without the issuer or the trust bundle it needs.
 */
interface Meta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface Pod {
  metadata: Meta;
  spec?: { hostNetwork?: boolean; containers?: { name: string }[]; initContainers?: { name: string }[] };
  status?: { phase?: string };
}

const MTLS_ANNOTATION = options.mtls.annotation ?? 'outrigger.dev/mtls';
const ISSUER = 'outrigger-identity';
/** Pods named per finding: enough to act on, short enough to read. */
const NAMED = 5;

const labelCommand = (ns: string): string =>
  `kubectl label namespace ${ns} ${INJECTION_LABEL}=enabled --overwrite`;

/** A key that means the injection label but is not it: another value, an annotation, a typo. */
export function nearMiss(ns: Meta): string | undefined {
  const value = ns.labels?.[INJECTION_LABEL];
  // "disabled" is the explicit opt-out (the gateway's own namespace carries it), not a near miss.
  if (value === 'enabled' || value === 'disabled') return undefined;
  if (value !== undefined) return `label ${INJECTION_LABEL}=${JSON.stringify(value)} is not "enabled"`;
  if (ns.annotations?.[INJECTION_LABEL] !== undefined)
    return `${INJECTION_LABEL} is an annotation; injection needs the label`;
  const typo = Object.keys(ns.labels ?? {}).find((k) => /outrigger/i.test(k) && /inject/i.test(k));
  return typo === undefined ? undefined : `label ${typo} is not ${INJECTION_LABEL}`;
}

export async function dataPlaneChecks(api: KubeApi): Promise<CheckResult[]> {
  const all = await api.call('GET', '/api/v1/namespaces');
  if (all.status !== 200)
    return [
      fail(
        'namespaces',
        `listing namespaces answered ${all.status}`,
        'run check as a user who may list namespaces',
      ),
    ];
  const namespaces = ((all.body as { items?: { metadata: Meta }[] }).items ?? []).map((n) => n.metadata);
  const out: CheckResult[] = [];
  for (const ns of namespaces) {
    const why = nearMiss(ns);
    if (why)
      out.push(
        warn(
          `namespace ${ns.name}`,
          `not opted in: ${why}, so its pods get no sidecar`,
          labelCommand(ns.name),
        ),
      );
  }
  const meshed = namespaces.filter((ns) => ns.labels?.[INJECTION_LABEL] === 'enabled').map((ns) => ns.name);
  let issuer: boolean | undefined;
  for (const namespace of meshed) {
    const r = await api.call('GET', `/api/v1/namespaces/${namespace}/pods`);
    if (r.status !== 200) {
      out.push(
        fail(
          `pods ${namespace}`,
          `listing pods answered ${r.status}`,
          'run check as a user who may list pods',
        ),
      );
      continue;
    }
    const pods = ((r.body as { items?: Pod[] }).items ?? []).filter(running);
    out.push(missingSidecars(namespace, pods));
    const strict = pods.filter((p) => p.metadata.annotations?.[MTLS_ANNOTATION] === 'strict');
    if (strict.length === 0) continue;
    issuer ??= await issuerAvailable(api);
    out.push(...(await strictNeeds(api, namespace, strict, issuer)));
  }
  return out;
}

const running = (p: Pod): boolean => p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed';

function missingSidecars(namespace: string, pods: Pod[]): CheckResult {
  const check = `pods ${namespace}`;
  const bare = pods.filter(
    (p) =>
      p.spec?.hostNetwork !== true &&
      p.metadata.annotations?.[INJECT_ANNOTATION] !== 'false' &&
      ![...(p.spec?.containers ?? []), ...(p.spec?.initContainers ?? [])].some(
        (c) => c.name === SIDECAR_NAME,
      ),
  );
  if (bare.length === 0) return pass(check, `${pods.length} pod(s), each with its sidecar`);
  const names = bare.slice(0, NAMED).map((p) => p.metadata.name);
  return warn(
    check,
    `${bare.length} of ${pods.length} pod(s) run without a sidecar (created before the namespace opted in, or while the webhook was down): ${names.join(', ')}${bare.length > NAMED ? ', ...' : ''}`,
    `recreate them, e.g. kubectl -n ${namespace} rollout restart deployment`,
  );
}

async function issuerAvailable(api: KubeApi): Promise<boolean> {
  const r = await api.call(
    'GET',
    `/apis/apps/v1/namespaces/${CONTROL_PLANE.namespace}/deployments/${ISSUER}`,
  );
  if (r.status !== 200) return false;
  return ((r.body as { status?: { availableReplicas?: number } }).status?.availableReplicas ?? 0) > 0;
}

/** Strict pods serve nobody without a certificate (the issuer) and the bundle to check peers. */
async function strictNeeds(
  api: KubeApi,
  namespace: string,
  strict: Pod[],
  issuer: boolean,
): Promise<CheckResult[]> {
  const check = `strict mTLS ${namespace}`;
  const who = `${strict.length} pod(s) with ${MTLS_ANNOTATION}: strict`;
  const out: CheckResult[] = [];
  if (!issuer)
    out.push(
      fail(
        check,
        `${who}, but the identity issuer ${CONTROL_PLANE.namespace}/${ISSUER} has no available replica: they get no certificate and stay unready`,
        `outrigger install --identity | kubectl apply -f - (it keeps the rest of the install), then kubectl -n ${CONTROL_PLANE.namespace} get pods -l app.kubernetes.io/component=identity`,
      ),
    );
  const bundle = await api.call(
    'GET',
    `/api/v1/namespaces/${namespace}/configmaps/${TRUST_BUNDLE_CONFIGMAP}`,
  );
  if (bundle.status !== 200)
    out.push(
      fail(
        check,
        `${who}, but ConfigMap ${TRUST_BUNDLE_CONFIGMAP} is missing (${bundle.status}): new pods stay in ContainerCreating`,
        `the issuer writes it into every opted-in namespace: start the issuer (outrigger install --identity | kubectl apply -f -)`,
      ),
    );
  return out.length > 0
    ? out
    : [pass(check, `${who}; the issuer is available and the trust bundle is present`)];
}
