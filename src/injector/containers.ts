import { MESH_PORT_NAME, TRUST_BUNDLE_CONFIGMAP, TRUST_BUNDLE_KEY, type Config } from '../config/options.ts';
import type { Container, EnvVar } from './types.ts';

/** Names of everything the injector adds; also how a second injection recognises the first. */
export const SIDECAR_NAME = 'outrigger-proxy';
export const INIT_NAME = 'outrigger-init';
export const VOLUMES = {
  token: 'outrigger-token',
  podInfo: 'outrigger-podinfo',
  snapshot: 'outrigger-snapshot',
  xtables: 'outrigger-xtables',
  identityToken: 'outrigger-identity-token',
  identity: 'outrigger-identity',
  trust: 'outrigger-trust',
} as const;
export const IDENTITY_AUDIENCE = 'outrigger-identity';

const meshOn = (config: Config): boolean => config.mtls !== 'off';
const dirOf = (file: string): string => file.slice(0, file.lastIndexOf('/')) || '/';
export const SNAPSHOT_DIR = '/var/run/outrigger/snapshot';

/**
 * Kubernetes' projected-token minimum is 600 s and exactly 3607 s is silently extended to a year
 * (security.md section 2.1), so one hour it is; the sidecar re-reads the file as kubelet rotates it.
 */
export const TOKEN_EXPIRATION_SECONDS = 3600;

export type Capture = 'transparent' | 'explicit';

export interface SidecarInputs {
  config: Config;
  capture: Capture;
  native: boolean;
  appPorts: number[];
}

const field = (name: string, fieldPath: string): EnvVar => ({
  name,
  valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath } },
});

/** The restricted Pod Security Standard, plus a read-only root (security.md section 3). */
function restrictedSecurityContext(uid: number): Record<string, unknown> {
  return {
    runAsUser: uid,
    runAsGroup: uid,
    runAsNonRoot: true,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

const probe = (path: string, port: number, periodSeconds: number, failureThreshold: number) => ({
  httpGet: { path, port },
  periodSeconds,
  failureThreshold,
  timeoutSeconds: 1,
});

/**
 * Without native sidecars, Kubernetes starts containers in order and waits for each postStart
 * hook, so a hook that polls /readyz holds the app containers until the proxy can route. The image
 * has node and nothing else, hence a one-line script rather than curl.
 */
function holdUntilReady(adminPort: number): string {
  return (
    `const d=Date.now()+120e3;const f=()=>fetch('http://127.0.0.1:${adminPort}/readyz')` +
    `.then(r=>{if(!r.ok)throw 0}).catch(()=>{if(Date.now()>d)process.exit(1);return new Promise(s=>setTimeout(s,250)).then(f)});f()`
  );
}

/**
 * The image preloads jemalloc (LD_PRELOAD), which reads this; glibc's malloc ignores it. One arena
 * and thread caches for small sizes only, with freed pages returned after a second by a background
 * thread: under load the sidecar's malloc memory is 10-15 MB instead of glibc's 26-43 MB, and it
 * shrinks again after the load (docs/benchmarks.md, "Memory").
 */
export const JEMALLOC_CONF =
  'narenas:1,tcache_max:4096,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0';

/** Pod identity from the downward API, under the names src/tracing/resource.ts reads. */
function sidecarEnv({ config, capture, appPorts }: SidecarInputs): EnvVar[] {
  const env: EnvVar[] = [
    field('OUTRIGGER_POD_NAME', 'metadata.name'),
    field('OUTRIGGER_POD_NAMESPACE', 'metadata.namespace'),
    field('OUTRIGGER_NODE_NAME', 'spec.nodeName'),
    field('OUTRIGGER_POD_IP', 'status.podIP'),
    field('OUTRIGGER_POD_SERVICE_ACCOUNT', 'spec.serviceAccountName'),
    // The capture mode was decided at injection (and may differ from the annotation, see the
    // Pod Security fallback), so it is pinned here: env beats the annotation in the sidecar.
    { name: 'OUTRIGGER_CAPTURE', value: capture },
    { name: 'OUTRIGGER_TOKEN_DIR', value: config.tokenDir },
    { name: 'OUTRIGGER_POD_INFO_DIR', value: config.podInfoDir },
  ];
  if (appPorts.length > 0) env.push({ name: 'OUTRIGGER_APP_PORTS', value: appPorts.join(',') });
  if (config.snapshotEnabled) env.push({ name: 'OUTRIGGER_SNAPSHOT', value: `${SNAPSHOT_DIR}/discovery.pb` });
  env.push({ name: 'MALLOC_CONF', value: JEMALLOC_CONF });
  return env;
}

export function sidecarContainer(inputs: SidecarInputs): Container {
  const { config, native } = inputs;
  const mounts = [
    { name: VOLUMES.token, mountPath: config.tokenDir, readOnly: true },
    { name: VOLUMES.podInfo, mountPath: config.podInfoDir, readOnly: true },
    ...(config.snapshotEnabled ? [{ name: VOLUMES.snapshot, mountPath: SNAPSHOT_DIR }] : []),
    ...(meshOn(config)
      ? [
          { name: VOLUMES.identityToken, mountPath: dirOf(config.identityTokenFile), readOnly: true },
          { name: VOLUMES.identity, mountPath: config.identityDir },
          { name: VOLUMES.trust, mountPath: dirOf(config.trustBundleFile), readOnly: true },
        ]
      : []),
  ];
  return {
    name: SIDECAR_NAME,
    image: config.proxyImage,
    imagePullPolicy: 'IfNotPresent',
    args: ['proxy'],
    ...(native ? { restartPolicy: 'Always' } : {}),
    ports: [
      { name: 'outrigger-admin', containerPort: config.adminPort, protocol: 'TCP' },
      ...(meshOn(config) ? [{ name: MESH_PORT_NAME, containerPort: config.meshPort, protocol: 'TCP' }] : []),
    ],
    env: sidecarEnv(inputs),
    resources: {
      requests: { cpu: config.proxyCpu, memory: config.proxyMemory },
      limits: { memory: memoryLimit(config.proxyMemory, config.proxyMemoryLimit) },
    },
    securityContext: restrictedSecurityContext(config.proxyUid),
    // Native sidecars: the next containers start once the startup probe passes (Linkerd does the same).
    ...(native ? { startupProbe: probe('/readyz', config.adminPort, 1, 120) } : {}),
    readinessProbe: probe('/readyz', config.adminPort, 5, 3),
    livenessProbe: probe('/healthz', config.adminPort, 10, 3),
    ...(native
      ? {}
      : {
          lifecycle: {
            postStart: { exec: { command: ['node', '-e', holdUntilReady(config.adminPort)] } },
          },
        }),
    volumeMounts: mounts,
    terminationMessagePolicy: 'FallbackToLogsOnError',
  };
}

const SUFFIX: Record<string, number> = {
  '': 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** Bytes of a quantity the option parser accepted (64Mi, 1G, 1e9, 134217728). */
export function quantityBytes(q: string): number {
  const m = /^\+?([\d.]+)(e\d+|[a-zA-Z]*)$/.exec(q.trim());
  if (!m) return NaN;
  const scale = m[2]?.startsWith('e') ? 10 ** Number(m[2].slice(1)) : SUFFIX[m[2] ?? ''];
  return Number(m[1]) * (scale ?? NaN);
}

/**
 * A pod whose limit is below its request is refused by the API server, so a request raised on its
 * own (the annotation alone) takes the limit up with it.
 */
function memoryLimit(request: string, limit: string): string {
  return quantityBytes(request) > quantityBytes(limit) ? request : limit;
}

/** Port ranges go through the environment in the annotation's syntax (8000-8100), not iptables' (8000:8100). */
const portList = (values: string[]): string => values.map((v) => v.replace(':', '-')).join(',');

/**
 * The iptables step: the only part that needs NET_ADMIN/NET_RAW and root, which is why a namespace
 * that enforces the baseline or restricted level gets explicit mode instead.
 */
export function initContainer(config: Config): Container {
  const env: EnvVar[] = [
    { name: 'OUTRIGGER_PROXY_UID', value: String(config.proxyUid) },
    { name: 'OUTRIGGER_EGRESS_PORT', value: String(config.egressPort) },
    { name: 'OUTRIGGER_INGRESS_PORT', value: String(config.ingressPort) },
    { name: 'OUTRIGGER_ADMIN_PORT', value: String(config.adminPort) },
  ];
  const lists: [string, string[], string][] = [
    ['OUTRIGGER_EXCLUDE_INBOUND_PORTS', config.excludeInboundPorts, portList(config.excludeInboundPorts)],
    ['OUTRIGGER_EXCLUDE_OUTBOUND_PORTS', config.excludeOutboundPorts, portList(config.excludeOutboundPorts)],
    ['OUTRIGGER_EXCLUDE_INBOUND_CIDRS', config.excludeInboundCidrs, config.excludeInboundCidrs.join(',')],
    ['OUTRIGGER_EXCLUDE_OUTBOUND_CIDRS', config.excludeOutboundCidrs, config.excludeOutboundCidrs.join(',')],
  ];
  for (const [name, values, value] of lists) if (values.length > 0) env.push({ name, value });
  return {
    name: INIT_NAME,
    image: config.proxyImage,
    imagePullPolicy: 'IfNotPresent',
    args: ['iptables'],
    env,
    resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '128Mi' } },
    securityContext: {
      runAsUser: 0,
      runAsGroup: 0,
      runAsNonRoot: false,
      privileged: false,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { add: ['NET_ADMIN', 'NET_RAW'], drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
    // iptables takes its lock under /run, which a read-only root filesystem does not allow.
    volumeMounts: [{ name: VOLUMES.xtables, mountPath: '/run' }],
    terminationMessagePolicy: 'FallbackToLogsOnError',
  };
}

export function volumes(config: Config, capture: Capture): { name: string; [k: string]: unknown }[] {
  const out: { name: string; [k: string]: unknown }[] = [
    {
      // The sidecar's own token, so the app's automountServiceAccountToken choice stays intact.
      // No subPath anywhere: a subPath mount never sees kubelet's rotations.
      name: VOLUMES.token,
      projected: {
        sources: [
          { serviceAccountToken: { path: 'token', expirationSeconds: TOKEN_EXPIRATION_SECONDS } },
          { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
          {
            downwardAPI: {
              items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }],
            },
          },
        ],
      },
    },
    {
      name: VOLUMES.podInfo,
      downwardAPI: {
        items: [
          { path: 'labels', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.labels' } },
          { path: 'annotations', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.annotations' } },
        ],
      },
    },
  ];
  if (config.snapshotEnabled) out.push({ name: VOLUMES.snapshot, emptyDir: { sizeLimit: '64Mi' } });
  if (capture === 'transparent')
    out.push({ name: VOLUMES.xtables, emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } });
  if (meshOn(config)) out.push(...meshVolumes(config));
  return out;
}

/**
 * Mesh identity: a second projected token for the issuer's audience only (the discovery token is
 * never sent to the issuer), an in-memory emptyDir that keeps the certificate across sidecar
 * restarts, and the trust roots from a ConfigMap (live: no subPath).
 */
function meshVolumes(config: Config): { name: string; [k: string]: unknown }[] {
  const tokenFile = config.identityTokenFile.slice(config.identityTokenFile.lastIndexOf('/') + 1);
  const bundleFile = config.trustBundleFile.slice(config.trustBundleFile.lastIndexOf('/') + 1);
  return [
    {
      name: VOLUMES.identityToken,
      projected: {
        sources: [
          {
            serviceAccountToken: {
              path: tokenFile,
              audience: IDENTITY_AUDIENCE,
              expirationSeconds: TOKEN_EXPIRATION_SECONDS,
            },
          },
        ],
      },
    },
    { name: VOLUMES.identity, emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
    {
      name: VOLUMES.trust,
      configMap: { name: TRUST_BUNDLE_CONFIGMAP, items: [{ key: TRUST_BUNDLE_KEY, path: bundleFile }] },
    },
  ];
}

/**
 * Explicit mode: the app's HTTP clients send plain-HTTP requests to the egress listener. Not every
 * client reads HTTP_PROXY (the client table in docs/injection.md, checked by
 * test/e2e/explicit-clients.test.ts): Node's fetch and http need NODE_USE_ENV_PROXY=1 (Node 24+),
 * the JVM reads only its own http.proxyHost/http.proxyPort properties (through
 * JAVA_TOOL_OPTIONS, which every JVM picks up), and gRPC's C core and grpc-js look for grpc_proxy
 * first. HTTPS stays direct: HTTPS_PROXY is left unset, so TLS from the app is not tunnelled.
 */
export function proxyEnv(config: Config): EnvVar[] {
  const proxy = `http://127.0.0.1:${config.egressPort}`;
  const noProxy = ['localhost', '127.0.0.1', '::1', ...config.excludeOutboundCidrs].join(',');
  return [
    { name: 'HTTP_PROXY', value: proxy },
    { name: 'http_proxy', value: proxy },
    { name: 'NO_PROXY', value: noProxy },
    { name: 'no_proxy', value: noProxy },
    { name: 'NODE_USE_ENV_PROXY', value: '1' },
    { name: 'JAVA_TOOL_OPTIONS', value: `-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=${config.egressPort}` },
    { name: 'grpc_proxy', value: proxy },
  ];
}
