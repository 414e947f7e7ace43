/**
 * What the downward API tells the sidecar about its pod. Labels and annotations come from the
 * downward-API volume (src/config/podinfo.ts); name, namespace and node from environment
 * variables the injector sets with fieldRef (a volume cannot carry spec.nodeName).
 */
export interface PodMeta {
  name?: string;
  namespace?: string;
  nodeName?: string;
  labels?: Record<string, string>;
  /** An explicit service name (the `outrigger.dev/service-name` annotation or its flag). */
  serviceName?: string;
}

/** The variables the injector fills from the downward API (fieldRef). */
export const POD_ENV = {
  name: 'OUTRIGGER_POD_NAME',
  namespace: 'OUTRIGGER_POD_NAMESPACE',
  nodeName: 'OUTRIGGER_NODE_NAME',
} as const;

export function podMetaFromEnv(env: Record<string, string | undefined>): PodMeta {
  const get = (k: string): string | undefined => (env[k] ? env[k] : undefined);
  return {
    name: get(POD_ENV.name),
    namespace: get(POD_ENV.namespace),
    nodeName: get(POD_ENV.nodeName),
  };
}

/**
 * The service name, in the order users of the OpenTelemetry operator and Istio expect: an explicit
 * name, then the well-known `app.kubernetes.io/name` label, then Istio's and Linkerd's `app`
 * label, then the pod name without its ReplicaSet/Pod hash suffixes, then OTel's own fallback.
 */
export function serviceNameOf(pod: PodMeta): string {
  const labels = pod.labels ?? {};
  return (
    pod.serviceName ??
    labels['app.kubernetes.io/name'] ??
    labels['app'] ??
    (pod.name ? workloadName(pod.name) : undefined) ??
    'unknown_service:outrigger'
  );
}

/**
 * "web-7d9f8b6c4d-x2x7q" -> "web": Deployment pods carry a template hash and a random suffix,
 * both in Kubernetes' vowel-free alphabet (rand.SafeEncodeString), so "hello-world" stays whole.
 */
const SAFE = '[bcdfghjklmnpqrstvwxz2456789]';
const GENERATED = new RegExp(`^(.+?)(-${SAFE}{6,10})?-${SAFE}{5}$`);

function workloadName(podName: string): string {
  const m = GENERATED.exec(podName);
  return m?.[1] ?? podName;
}
