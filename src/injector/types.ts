/**
 * The few Kubernetes shapes the injector reads. Plain structural types on purpose: the injector
 * must not pull @kubernetes/client-node into the webhook, and everything it
 * does not read passes through untouched.
 */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: unknown;
}

export interface ContainerPort {
  containerPort: number;
  protocol?: string;
  name?: string;
}

export interface Container {
  name: string;
  image?: string;
  env?: EnvVar[];
  ports?: ContainerPort[];
  restartPolicy?: string;
  [key: string]: unknown;
}

export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  volumes?: { name: string }[];
  hostNetwork?: boolean;
  [key: string]: unknown;
}

/** A Pod, or the template of a workload (which has no name of its own). */
export interface PodLike {
  metadata?: ObjectMeta;
  spec: PodSpec;
}

/** What the injector needs of the namespace: its name and labels (for Pod Security levels). */
export interface NamespaceInfo {
  name: string;
  labels?: Record<string, string>;
}

/** RFC 6902 operations; the injector only ever emits `add` (upstream webhook guidance). */
export interface PatchOp {
  op: 'add';
  path: string;
  value: unknown;
}
