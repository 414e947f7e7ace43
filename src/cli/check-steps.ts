import { X509Certificate } from 'node:crypto';
import { connect } from 'node:tls';
import { errorMessage } from '../shared/errors.ts';
import { adminBase, adminGet } from './admin-url.ts';
import { INJECTION_LABEL } from '../config/options.ts';
import { CONTROL_PLANE } from './control-plane.ts';
import { apiVersion, type KubeApi } from './kube-api.ts';

/** One check's result; every warning and failure carries what to do. */
export type Outcome = 'pass' | 'warn' | 'fail';

export interface CheckResult {
  check: string;
  outcome: Outcome;
  message: string;
  /** What to do, for warnings and failures. */
  fix?: string;
}

export const OPTED_IN = `${INJECTION_LABEL}=enabled`;
const { namespace: SYSTEM, service: SERVICE } = CONTROL_PLANE;
const REINSTALL = 'outrigger install | kubectl apply -f -';
/** A serving certificate this close to its end is a warning. */
const EXPIRY_WARN_MS = 14 * 86_400_000;

type Obj = { metadata: { name: string; labels?: Record<string, string> } } & Record<string, unknown>;
interface Webhook {
  name: string;
  clientConfig: { url?: string; caBundle?: string; service?: { name: string; namespace: string } };
}

const fail = (check: string, message: string, fix: string): CheckResult => ({
  check,
  outcome: 'fail',
  message,
  fix,
});
const pass = (check: string, message: string): CheckResult => ({ check, outcome: 'pass', message });
const warn = (check: string, message: string, fix: string): CheckResult => ({
  check,
  outcome: 'warn',
  message,
  fix,
});

/** Every cluster check, in order; a check whose input is missing is not run. */
export async function runChecks(api: KubeApi, now: number): Promise<CheckResult[]> {
  const out: CheckResult[] = [];
  try {
    out.push(pass('API server', `${api.server} answers, Kubernetes ${await apiVersion(api)}`));
  } catch (e) {
    out.push(
      fail(
        'API server',
        errorMessage(e),
        `check the kubeconfig ${api.kubeconfig} and its current context (kubectl cluster-info)`,
      ),
    );
    return out;
  }
  const config = await api.call(
    'GET',
    `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${CONTROL_PLANE.webhookConfiguration}`,
  );
  if (config.status !== 200) {
    out.push(
      config.status === 404
        ? fail(
            'webhook configuration',
            `MutatingWebhookConfiguration ${CONTROL_PLANE.webhookConfiguration} is not installed`,
            REINSTALL,
          )
        : fail(
            'webhook configuration',
            `reading it answered ${config.status}`,
            'run check as a user who may read mutatingwebhookconfigurations',
          ),
    );
  } else {
    const webhooks = (config.body as { webhooks?: Webhook[] }).webhooks ?? [];
    out.push(
      pass('webhook configuration', `${CONTROL_PLANE.webhookConfiguration}: ${webhooks.length} webhook(s)`),
    );
    out.push(...(await certificateChecks(api, webhooks, now)));
    out.push(await endpointCheck(api, webhooks));
  }
  out.push(...(await namespaceChecks(api)));
  return out;
}

function bundleCas(webhooks: Webhook[]): { cas: X509Certificate[]; error?: string } {
  const b64 = webhooks[0]?.clientConfig.caBundle;
  if (!b64) return { cas: [], error: 'the webhooks have no caBundle' };
  if (webhooks.some((w) => w.clientConfig.caBundle !== b64))
    return { cas: [], error: 'the webhooks carry different caBundles' };
  const pems =
    Buffer.from(b64, 'base64')
      .toString('utf8')
      .match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? [];
  try {
    return { cas: pems.map((p) => new X509Certificate(p)) };
  } catch (e) {
    return { cas: [], error: `the caBundle does not parse: ${errorMessage(e)}` };
  }
}

/** The certificate the webhook serves: from its URL, or from the Secret the Deployment mounts. */
async function servingCertificate(
  api: KubeApi,
  webhooks: Webhook[],
): Promise<{ cert?: X509Certificate; from: string; error?: string }> {
  const url = webhooks[0]?.clientConfig.url;
  if (url) {
    const from = `the webhook at ${new URL(url).origin}`;
    try {
      return { cert: await peerCertificate(new URL(url)), from };
    } catch (e) {
      return { from, error: errorMessage(e) };
    }
  }
  const from = `Secret ${SYSTEM}/${CONTROL_PLANE.tlsSecret}`;
  const r = await api.call('GET', `/api/v1/namespaces/${SYSTEM}/secrets/${CONTROL_PLANE.tlsSecret}`);
  if (r.status !== 200) return { from, error: `reading it answered ${r.status}` };
  const crt = (r.body as { data?: Record<string, string> }).data?.['tls.crt'];
  try {
    return { cert: new X509Certificate(Buffer.from(crt ?? '', 'base64')), from };
  } catch (e) {
    return { from, error: `its tls.crt does not parse: ${errorMessage(e)}` };
  }
}

function peerCertificate(url: URL): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    // Verification is done below against the caBundle, the way the API server does it.
    const socket = connect({
      host,
      port: Number(url.port || 443),
      rejectUnauthorized: false,
      servername: /^[\d.:]+$/.test(host) ? undefined : host,
    });
    socket.setTimeout(5_000, () => socket.destroy(new Error('no TLS handshake within 5s')));
    socket.once('secureConnect', () => {
      const cert = socket.getPeerX509Certificate();
      socket.end();
      if (cert) resolve(cert);
      else reject(new Error('no certificate presented'));
    });
    socket.once('error', reject);
  });
}

async function certificateChecks(api: KubeApi, webhooks: Webhook[], now: number): Promise<CheckResult[]> {
  const { cas, error } = bundleCas(webhooks);
  if (error) return [fail('caBundle', error, REINSTALL)];
  const serving = await servingCertificate(api, webhooks);
  if (!serving.cert)
    return [
      fail(
        'serving certificate',
        `cannot read it from ${serving.from}: ${serving.error}`,
        `${REINSTALL} (it creates the Secret), or check that the webhook runs`,
      ),
    ];
  const cert = serving.cert;
  const issuer = cas.find((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey));
  const out: CheckResult[] = [];
  out.push(
    issuer
      ? pass('caBundle', `matches the serving certificate from ${serving.from} (issuer ${issuer.subject})`)
      : fail(
          'caBundle',
          `the serving certificate from ${serving.from} (issuer ${cert.issuer}) is not signed by the caBundle's CA (${cas.map((c) => c.subject).join(', ')}): the API server refuses to call the webhook`,
          `apply the caBundle and the Secret from the same run: ${REINSTALL}`,
        ),
  );
  const until = Date.parse(cert.validTo);
  const from = Date.parse(cert.validFrom);
  if (until <= now)
    out.push(
      fail(
        'certificate expiry',
        `the serving certificate expired on ${cert.validTo}`,
        `issue a new one: ${REINSTALL}`,
      ),
    );
  else if (from > now)
    out.push(
      fail(
        'certificate expiry',
        `the serving certificate is not valid before ${cert.validFrom}`,
        'check the clocks, or re-issue it',
      ),
    );
  else if (until - now < EXPIRY_WARN_MS)
    out.push(
      warn(
        'certificate expiry',
        `the serving certificate expires on ${cert.validTo}`,
        `rotate it soon: ${REINSTALL}`,
      ),
    );
  else out.push(pass('certificate expiry', `valid until ${cert.validTo}`));
  return out;
}

async function endpointCheck(api: KubeApi, webhooks: Webhook[]): Promise<CheckResult> {
  const url = webhooks[0]?.clientConfig.url;
  if (url) {
    const { cas } = bundleCas(webhooks);
    try {
      const status = await httpsStatus(
        new URL('/healthz', url),
        cas.map((c) => c.toString()),
      );
      return status === 200
        ? pass('webhook endpoints', `the webhook at ${new URL(url).origin} answers /healthz`)
        : fail(
            'webhook endpoints',
            `the webhook at ${new URL(url).origin} answered /healthz with ${status}`,
            'check the webhook process and its log',
          );
    } catch (e) {
      return fail(
        'webhook endpoints',
        `no webhook answers at ${new URL(url).origin} (${errorMessage(e)}); pods of opted-in namespaces cannot be created (failurePolicy Fail)`,
        'start the webhook (outrigger webhook) at that address',
      );
    }
  }
  const r = await api.call(
    'GET',
    `/apis/discovery.k8s.io/v1/namespaces/${SYSTEM}/endpointslices?labelSelector=${encodeURIComponent(`kubernetes.io/service-name=${SERVICE}`)}`,
  );
  if (r.status !== 200)
    return fail(
      'webhook endpoints',
      `listing the EndpointSlices of ${SYSTEM}/${SERVICE} answered ${r.status}`,
      'run check as a user who may list endpointslices there',
    );
  const slices = (r.body as { items?: { endpoints?: { conditions?: { ready?: boolean } }[] }[] }).items ?? [];
  const ready = slices.flatMap((s) => s.endpoints ?? []).filter((e) => e.conditions?.ready !== false).length;
  return ready > 0
    ? pass('webhook endpoints', `Service ${SYSTEM}/${SERVICE} has ${ready} ready endpoint(s)`)
    : fail(
        'webhook endpoints',
        `Service ${SYSTEM}/${SERVICE} has no ready endpoint: pods of opted-in namespaces cannot be created (failurePolicy Fail)`,
        `kubectl -n ${SYSTEM} get deploy,pods; kubectl -n ${SYSTEM} describe pods (is the image pullable? is the Secret there?)`,
      );
}

function httpsStatus(url: URL, ca: string[]): Promise<number> {
  return import('node:https').then(
    ({ request }) =>
      new Promise((resolve, reject) => {
        const req = request(url, { ca, signal: AbortSignal.timeout(5_000) }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      }),
  );
}

const SIDECAR_NEEDS = [
  { group: '', resource: 'services' },
  { group: 'discovery.k8s.io', resource: 'endpointslices' },
].flatMap((r) => ['list', 'watch'].map((verb) => ({ ...r, verb })));

async function namespaceChecks(api: KubeApi): Promise<CheckResult[]> {
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

/** A running sidecar, through its admin API: ready, and its token not about to expire. */
export async function sidecarChecks(admin: string, now: number): Promise<CheckResult[]> {
  try {
    const base = adminBase(admin);
    const d = (await adminGet(base, '/debug/discovery', 'json')).body as {
      ready?: boolean;
      staleServices?: number;
      counters?: { apiFailures?: number; tokenExpiresAtMs?: number };
    };
    const out: CheckResult[] = [
      d.ready
        ? pass('sidecar discovery', `ready; ${d.staleServices ?? 0} stale Service(s)`)
        : fail(
            'sidecar discovery',
            `not ready; ${d.counters?.apiFailures ?? 0} API request(s) failed`,
            'outrigger status --admin ... ; kubectl logs POD -c outrigger-proxy',
          ),
    ];
    const exp = d.counters?.tokenExpiresAtMs;
    if (exp !== undefined)
      out.push(
        exp > now
          ? pass('sidecar token', `expires ${new Date(exp).toISOString()} (kubelet renews it)`)
          : fail(
              'sidecar token',
              `expired ${new Date(exp).toISOString()}`,
              'kubelet did not renew the projected token: check the node',
            ),
      );
    return out;
  } catch (e) {
    return [fail('sidecar', errorMessage(e), 'kubectl port-forward POD 7402, then --admin 127.0.0.1:7402')];
  }
}
