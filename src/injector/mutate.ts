import { INJECT_ANNOTATION, INJECTED_ANNOTATION, options } from '../config/options.ts';
import { parseValue } from '../config/parse.ts';
import {
  INIT_NAME,
  SIDECAR_NAME,
  initContainer,
  proxyEnv,
  sidecarContainer,
  volumes,
  type Capture,
} from './containers.ts';
import { PatchBuilder } from './patch.ts';
import { rewriteProbes } from './probes.ts';
import { podConfig, type InjectorSettings } from './settings.ts';
import type { Container, NamespaceInfo, PatchOp, PodLike } from './types.ts';

export type InjectResult =
  | { kind: 'injected'; patch: PatchOp[]; warnings: string[] }
  | { kind: 'skipped'; reason: string; warnings: string[] };

const PSS_ENFORCE = 'pod-security.kubernetes.io/enforce';
const DEFAULT_CONTAINER = 'kubectl.kubernetes.io/default-container';
const MIRROR = 'kubernetes.io/config.mirror';

/**
 * The one mutation behind both the webhook and `outrigger inject`: pure, so a golden file pins
 * every decision. Throws config_invalid (naming annotation, value and what is allowed) for a pod
 * that must be rejected; returns `skipped` with the reason for a pod that is left as it is.
 */
export function injectPod(pod: PodLike, ns: NamespaceInfo, settings: InjectorSettings): InjectResult {
  const skip = skipReason(pod, ns, settings);
  if (skip) return { kind: 'skipped', reason: skip, warnings: [] };
  const annotations = pod.metadata?.annotations ?? {};
  const config = podConfig(settings.defaults, annotations);
  const warnings: string[] = [];
  const capture = chooseCapture(config.capture as Capture, ns, warnings);
  if (capture === 'explicit') warnExplicitExclusions(annotations, warnings);
  if (!config.nativeSidecar) warnLegacySidecar(pod, capture, warnings);

  const spec = pod.spec;
  const patch = new PatchBuilder();
  const sidecar = sidecarContainer({
    config,
    capture,
    native: config.nativeSidecar,
    appPorts: appPorts(spec.containers),
  });
  if (capture === 'explicit') {
    addProxyEnv(patch, '/spec/containers', spec.containers, proxyEnv(config), warnings);
    // The user's init containers run after a native sidecar is ready, so they can use it too.
    if (config.nativeSidecar)
      addProxyEnv(patch, '/spec/initContainers', spec.initContainers ?? [], proxyEnv(config), warnings);
  }
  if (config.mtls === 'strict') {
    // Before the sidecar is prepended: these paths use the app containers' own indexes.
    const { ops, probes } = rewriteProbes(spec.containers, config.adminPort);
    patch.ops.push(...ops);
    if (ops.length > 0)
      sidecar.env = [...(sidecar.env ?? []), { name: 'OUTRIGGER_APP_PROBES', value: JSON.stringify(probes) }];
  }
  // Order: iptables first, then the native sidecar, then the user's init containers, so that
  // their traffic is already proxied (the placement Linkerd uses).
  const inits = [
    ...(capture === 'transparent' ? [initContainer(config)] : []),
    ...(config.nativeSidecar ? [sidecar] : []),
  ];
  patch.prepend('/spec/initContainers', spec.initContainers, inits);
  if (!config.nativeSidecar) patch.prepend('/spec/containers', spec.containers, [sidecar]);
  patch.append('/spec/volumes', spec.volumes, volumes(config, capture));
  // A projected token needs a named ServiceAccount. The ServiceAccount admission plugin names
  // "default" before webhooks run; where it is off, the pod would be refused, so name it here.
  if (spec.serviceAccountName === undefined && spec.serviceAccount === undefined)
    patch.ops.push({ op: 'add', path: '/spec/serviceAccountName', value: 'default' });
  addAnnotations(patch, pod, {
    [INJECTED_ANNOTATION]: JSON.stringify({
      version: settings.version,
      capture,
      sidecar: config.nativeSidecar ? 'native' : 'container',
    }),
    ...meshRoutesDefault(settings, annotations),
  });
  return { kind: 'injected', patch: patch.ops, warnings };
}

/**
 * The webhook's --mesh-routes (a cluster-wide default for the sidecar's option) reaches the
 * sidecar as the pod's annotation, written only where the pod has none: the sidecar reads its
 * annotation (its env would beat the annotation there), and the pod's own choice wins.
 */
function meshRoutesDefault(
  settings: InjectorSettings,
  annotations: Record<string, string>,
): Record<string, string> {
  const { annotation, default: builtIn } = options.meshRoutes;
  const wanted = settings.defaults.meshRoutes;
  if (annotation === undefined || wanted === builtIn || annotations[annotation] !== undefined) return {};
  return { [annotation]: String(wanted) };
}

function skipReason(pod: PodLike, ns: NamespaceInfo, settings: InjectorSettings): string | undefined {
  const annotations = pod.metadata?.annotations ?? {};
  if (settings.ignoredNamespaces.includes(ns.name)) return `namespace ${ns.name} is never injected`;
  if (annotations[MIRROR] !== undefined) return 'mirror (static) pods cannot be changed';
  if (pod.spec.hostNetwork === true) return 'hostNetwork pods share the node network and are not injected';
  if (isInjected(pod)) return 'already injected';
  const raw = annotations[INJECT_ANNOTATION];
  const wanted = raw === undefined || parseValue(options.inject.parser, INJECT_ANNOTATION, raw, 'annotation');
  if (!wanted) return `${INJECT_ANNOTATION} is false`;
  return undefined;
}

/** Idempotence: the status annotation, or any container by our names (another tool may strip annotations). */
export function isInjected(pod: PodLike): boolean {
  if (pod.metadata?.annotations?.[INJECTED_ANNOTATION] !== undefined) return true;
  const all = [...(pod.spec.initContainers ?? []), ...pod.spec.containers];
  return all.some((c) => c.name === SIDECAR_NAME || c.name === INIT_NAME);
}

function chooseCapture(wanted: Capture, ns: NamespaceInfo, warnings: string[]): Capture {
  const level = ns.labels?.[PSS_ENFORCE];
  if (wanted === 'transparent' && (level === 'restricted' || level === 'baseline')) {
    warnings.push(
      `outrigger: namespace enforces Pod Security "${level}", which forbids NET_ADMIN; using explicit capture`,
    );
    return 'explicit';
  }
  return wanted;
}

/** What a regular-container sidecar cannot do that a native one does. */
function warnLegacySidecar(pod: PodLike, capture: Capture, warnings: string[]): void {
  const restart = pod.spec.restartPolicy;
  if (restart === 'Never' || restart === 'OnFailure')
    warnings.push('outrigger: without native sidecars this pod never completes while the proxy runs');
  if (capture === 'transparent' && (pod.spec.initContainers?.length ?? 0) > 0)
    warnings.push(
      'outrigger: init containers run before the proxy without native sidecars; their traffic is lost',
    );
}

function warnExplicitExclusions(annotations: Record<string, string>, warnings: string[]): void {
  const ignored = [options.excludeInboundPorts, options.excludeOutboundPorts, options.excludeInboundCidrs]
    .map((o) => o.annotation ?? '')
    .filter((a) => annotations[a] !== undefined);
  for (const a of ignored) warnings.push(`outrigger: ${a} has no effect in explicit capture mode`);
}

/** Before any insertion: the indices are those of the pod as received. */
function addProxyEnv(
  patch: PatchBuilder,
  path: string,
  containers: Container[],
  env: Container['env'] & {},
  warnings: string[],
): void {
  containers.forEach((c, i) => {
    const have = new Set((c.env ?? []).map((e) => e.name));
    const kept = env.filter((e) => have.has(e.name)).map((e) => e.name);
    if (kept.length > 0)
      warnings.push(`outrigger: container ${c.name} sets ${kept.join(', ')}; kept its own value`);
    patch.append(
      `${path}/${i}/env`,
      c.env,
      env.filter((e) => !have.has(e.name)),
    );
  });
}

function addAnnotations(patch: PatchBuilder, pod: PodLike, entries: Record<string, string>): void {
  const existing = pod.metadata?.annotations;
  const first = pod.spec.containers[0]?.name;
  const all = { ...entries };
  // With the sidecar as a regular container, `kubectl logs` would otherwise have to ask which one.
  if (first && existing?.[DEFAULT_CONTAINER] === undefined) all[DEFAULT_CONTAINER] = first;
  if (pod.metadata === undefined)
    patch.ops.push({ op: 'add', path: '/metadata', value: { annotations: all } });
  else patch.addEntries('/metadata/annotations', existing, all);
}

function appPorts(containers: Container[]): number[] {
  const ports = containers.flatMap((c) =>
    (c.ports ?? []).filter((p) => (p.protocol ?? 'TCP') === 'TCP').map((p) => p.containerPort),
  );
  return [...new Set(ports)].sort((a, b) => a - b);
}
