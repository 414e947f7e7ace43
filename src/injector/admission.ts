import { isOutriggerError, OutriggerError } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { injectPod } from './mutate.ts';
import { podShapeProblem } from './pod-shape.ts';
import type { InjectorSettings } from './settings.ts';
import type { NamespaceInfo, PodLike } from './types.ts';

export interface AdmissionRequest {
  uid: string;
  kind?: { group?: string; version?: string; kind?: string };
  operation?: string;
  namespace?: string;
  name?: string;
  dryRun?: boolean;
  object?: unknown;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  patchType?: 'JSONPatch';
  patch?: string;
  warnings?: string[];
  status?: { code: number; reason: string; message: string };
}

export interface AdmissionReview {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  response: AdmissionResponse;
}

/** Pod Security level of the namespace, told by which webhook entry called (see manifests). */
export type PodSecurityLevel = 'privileged' | 'baseline' | 'restricted';

/**
 * Answers one AdmissionReview v1. The webhook has no API access of its own (no RBAC beyond its
 * certificate), so the namespace's Pod Security level comes from the URL, which the
 * MutatingWebhookConfiguration picks by namespaceSelector (one entry per level).
 */
export function review(
  body: unknown,
  level: PodSecurityLevel,
  settings: InjectorSettings,
  log: Logger,
): AdmissionReview {
  const request = parseRequest(body);
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: respond(request, level, settings, log),
  };
}

function respond(
  req: AdmissionRequest,
  level: PodSecurityLevel,
  settings: InjectorSettings,
  log: Logger,
): AdmissionResponse {
  const base = { uid: req.uid };
  if (req.kind?.kind !== 'Pod' || req.operation !== 'CREATE') return { ...base, allowed: true };
  const pod = req.object as PodLike;
  const ns: NamespaceInfo = {
    name: req.namespace ?? pod.metadata?.namespace ?? 'default',
    labels: level === 'privileged' ? {} : { 'pod-security.kubernetes.io/enforce': level },
  };
  const who = { namespace: ns.name, pod: pod.metadata?.name ?? pod.metadata?.generateName, uid: req.uid };
  try {
    const result = injectPod(pod, ns, settings);
    const warnings = result.warnings.length > 0 ? { warnings: result.warnings } : {};
    if (result.kind === 'skipped') {
      log.debug('injection skipped', { ...who, reason: result.reason });
      return { ...base, allowed: true, ...warnings };
    }
    log.info('sidecar injected', { ...who, dryRun: req.dryRun === true, warnings: result.warnings });
    const patch = Buffer.from(JSON.stringify(result.patch)).toString('base64');
    return { ...base, allowed: true, patchType: 'JSONPatch', patch, ...warnings };
  } catch (e) {
    if (!isOutriggerError(e, 'config_invalid')) throw e;
    log.info('pod rejected', { ...who, reason: e.message });
    return { ...base, allowed: false, status: { code: 400, reason: 'BadRequest', message: e.message } };
  }
}

/** Every type the webhook relies on is checked here, so what follows cannot crash on a bad body. */
function parseRequest(body: unknown): AdmissionRequest {
  const b = body as { apiVersion?: unknown; kind?: unknown; request?: unknown } | null;
  if (b?.apiVersion !== 'admission.k8s.io/v1' || b.kind !== 'AdmissionReview')
    throw invalid('expected an admission.k8s.io/v1 AdmissionReview');
  const req = b.request as Record<string, unknown> | null | undefined;
  if (typeof req !== 'object' || req === null || Array.isArray(req))
    throw invalid('AdmissionReview has no request object');
  if (typeof req.uid !== 'string' || req.uid === '') throw invalid('AdmissionReview has no request.uid');
  const problem = requestProblem(req);
  if (problem !== undefined) throw invalid(`AdmissionReview ${problem}`);
  return req as unknown as AdmissionRequest;
}

function requestProblem(req: Record<string, unknown>): string | undefined {
  const kind = req.kind as Record<string, unknown> | undefined;
  if (kind !== undefined && (typeof kind !== 'object' || kind === null || Array.isArray(kind)))
    return 'request.kind must be an object';
  for (const f of ['group', 'version', 'kind'] as const)
    if (kind?.[f] !== undefined && typeof kind[f] !== 'string') return `request.kind.${f} must be a string`;
  for (const f of ['operation', 'namespace', 'name'] as const)
    if (req[f] !== undefined && typeof req[f] !== 'string') return `request.${f} must be a string`;
  if (req.dryRun !== undefined && typeof req.dryRun !== 'boolean') return 'request.dryRun must be a boolean';
  return kind?.kind === 'Pod' ? podShapeProblem(req.object, 'request.object') : undefined;
}

const invalid = (message: string): OutriggerError => new OutriggerError('admission_invalid', message);
