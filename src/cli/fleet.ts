import { INJECTED_ANNOTATION } from '../config/options.ts';
import { OutriggerError } from '../shared/errors.ts';
import { formatTable } from './common.ts';
import type { KubeApi } from './kube-api.ts';
import { sidecarVersion } from './version.ts';

/**
 * The fleet view of `outrigger status -n NS | -A`: every pod the webhook injected, its sidecar's
 * readiness and version read through the API server's pod proxy (no port-forward; /readyz and
 * /metrics answer off loopback), and the version skew against the control plane (the webhook
 * Deployment's image).
 */
export interface SidecarRow {
  namespace: string;
  pod: string;
  /** yes / no from the sidecar's /readyz; unreachable when the pod proxy got no answer. */
  ready: 'yes' | 'no' | 'unreachable';
  version: string;
  skew: boolean;
  reason: string;
}

export interface Fleet {
  controlPlane: string | undefined;
  sidecars: SidecarRow[];
}

interface PodMeta {
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  spec: { initContainers?: ContainerMeta[]; containers?: ContainerMeta[] };
  status: { phase?: string };
}
interface ContainerMeta {
  name: string;
  image?: string;
  ports?: { name?: string; containerPort: number }[];
}

const SIDECAR = 'outrigger-proxy';
const WEBHOOK = '/apis/apps/v1/namespaces/outrigger-system/deployments/outrigger-webhook';
/** Pods asked at once through the API server: enough for a fleet, gentle on the API. */
const PARALLEL = 8;

export async function readFleet(api: KubeApi, namespace: string | undefined): Promise<Fleet> {
  const path =
    namespace === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
  const list = await api.call('GET', path);
  if (list.status !== 200)
    throw new OutriggerError(
      list.status === 403 ? 'kube_forbidden' : 'kube_bad_response',
      `listing pods (${path}) answered ${list.status}: ${JSON.stringify(list.body).slice(0, 200)}`,
    );
  const pods = ((list.body as { items?: PodMeta[] }).items ?? []).filter(
    (p) => p.metadata.annotations?.[INJECTED_ANNOTATION] !== undefined,
  );
  const controlPlane = await webhookVersion(api);
  const sidecars: SidecarRow[] = [];
  for (let i = 0; i < pods.length; i += PARALLEL)
    sidecars.push(
      ...(await Promise.all(pods.slice(i, i + PARALLEL).map((p) => readSidecar(api, p, controlPlane)))),
    );
  return { controlPlane, sidecars };
}

/** The tag of the webhook Deployment's image: the version that injects new pods. */
export async function webhookVersion(api: KubeApi): Promise<string | undefined> {
  const r = await api.call('GET', WEBHOOK);
  if (r.status !== 200) return undefined;
  const image = (r.body as { spec?: { template?: { spec?: { containers?: ContainerMeta[] } } } }).spec
    ?.template?.spec?.containers?.[0]?.image;
  return image === undefined ? undefined : imageTag(image);
}

const imageTag = (image: string): string => /:([^:/@]+)(@.*)?$/.exec(image)?.[1] ?? image;

async function readSidecar(
  api: KubeApi,
  pod: PodMeta,
  controlPlane: string | undefined,
): Promise<SidecarRow> {
  const { name, namespace } = pod.metadata;
  const sidecar = [...(pod.spec.initContainers ?? []), ...(pod.spec.containers ?? [])].find(
    (c) => c.name === SIDECAR,
  );
  const row: SidecarRow = {
    namespace,
    pod: name,
    ready: 'unreachable',
    version: sidecar?.image ? imageTag(sidecar.image) : 'unknown',
    skew: false,
    reason: '',
  };
  if (pod.status.phase !== 'Running') return { ...row, reason: `pod ${pod.status.phase ?? 'Unknown'}` };
  const port = sidecar?.ports?.find((p) => p.name === 'outrigger-admin')?.containerPort ?? 7402;
  const base = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}:${port}/proxy`;
  const [ready, metrics] = await Promise.all([
    api.call('GET', `${base}/readyz`),
    api.call('GET', `${base}/metrics`),
  ]);
  const running = metrics.status === 200 ? sidecarVersion(String(metrics.body)) : undefined;
  if (running) row.version = running.version;
  row.skew = controlPlane !== undefined && row.version !== controlPlane;
  if (ready.status === 200) return { ...row, ready: 'yes' };
  // A 503 from the API server itself (the pod cannot be reached) carries no readiness detail.
  const body = ready.body as { ready?: unknown; detail?: ReadyDetail } | undefined;
  if (ready.status !== 503 || typeof body !== 'object' || body.ready === undefined)
    return { ...row, reason: `the pod proxy answered ${ready.status}` };
  return { ...row, ready: 'no', reason: notReady(body.detail ?? {}) };
}

interface ReadyDetail {
  draining?: boolean;
  discovery?: { ready?: boolean };
  meshCertificate?: boolean;
}

/** What /readyz's detail says is missing, in the words `outrigger status` uses for one pod. */
function notReady(d: ReadyDetail): string {
  const why = [
    ...(d.draining ? ['draining'] : []),
    ...(d.meshCertificate === false ? ['no valid mesh certificate'] : []),
    ...(d.discovery?.ready === false ? ['discovery has not synced'] : []),
  ];
  return why.length > 0 ? why.join('; ') : `not ready: ${JSON.stringify(d)}`;
}

export function formatFleet(f: Fleet): string {
  const rows = [['NAMESPACE', 'POD', 'READY', 'VERSION', 'REASON']];
  for (const s of f.sidecars)
    rows.push([s.namespace, s.pod, s.ready, s.skew ? `${s.version} (skew)` : s.version, s.reason]);
  const lines = formatTable(rows);
  const ready = f.sidecars.filter((s) => s.ready === 'yes').length;
  const skewed = f.sidecars.filter((s) => s.skew).length;
  lines.push(
    '',
    `${f.sidecars.length} sidecar(s), ${ready} ready, ${skewed} on another version than the control plane (${f.controlPlane ?? 'not installed'})`,
  );
  return f.sidecars.length === 0 ? 'no injected pods' : lines.join('\n');
}
