import * as p from './parse.ts';
import type { Parser } from './parse.ts';

/**
 * Every setting of the sidecar and the injector, in ONE table: its flag, its OUTRIGGER_* variable
 * and its pod annotation. The webhook validates annotations with the same parsers the sidecar uses
 * at start-up, so a pod the webhook admits always starts.
 *
 * Precedence: flag > env > annotation > default.
 * `live`: re-applied when the downward-API annotations file changes; the rest need a restart.
 * `scope`: 'proxy' settings are read by the sidecar; 'inject' ones only shape the injected pod.
 */
export interface OptionSpec<T> {
  flag: string;
  env: string;
  annotation?: string;
  parser: Parser<T>;
  default: T;
  describe: string;
  live?: boolean;
  repeatable?: boolean;
  scope: 'proxy' | 'inject';
  /** The spellings before a rename, still read for one release with a warning (docs/cli.md). */
  was?: { flag?: string; env?: string; parser?: Parser<T> };
}

export const ANNOTATION_PREFIX = 'outrigger.dev/';
export const INJECTION_LABEL = 'outrigger.dev/injection';
export const INJECTED_ANNOTATION = 'outrigger.dev/injected';
export const INJECT_ANNOTATION = 'outrigger.dev/inject';
/**
 * The ConfigMap with the mesh trust roots in each meshed namespace: `outrigger identity` keeps it
 * there, the injector mounts it into meshed pods.
 */
export const TRUST_BUNDLE_CONFIGMAP = 'outrigger-trust-bundle';
export const TRUST_BUNDLE_KEY = 'ca.crt';
/**
 * The name of the sidecar's mesh port on a meshed pod (the injector adds the container port). A
 * Service port with this name and targetPort tells meshed clients which of its endpoints run a
 * mesh listener: the EndpointSlice controller lists under it only the pods that have the port.
 */
export const MESH_PORT_NAME = 'outrigger-mesh';

const opt = <T>(o: OptionSpec<T>): OptionSpec<T> => o;

/** --<kind>-timeout 30s, kept in ms; until 0.2 it was --<kind>-timeout-ms 30000 (docs/cli.md). */
function timeoutMs(kind: string, maxMs: number): Pick<OptionSpec<number>, 'flag' | 'env' | 'parser' | 'was'> {
  const env = `OUTRIGGER_${kind.toUpperCase()}_TIMEOUT`;
  return {
    flag: `--${kind}-timeout <duration>`,
    env,
    parser: p.duration(1, maxMs),
    was: { flag: `--${kind}-timeout-ms <ms>`, env: `${env}_MS`, parser: p.countOf('ms', 1, maxMs) },
  };
}
const a = (name: string): string => ANNOTATION_PREFIX + name;

export const options = {
  source: opt({
    flag: '--source <kube|file:PATH>',
    env: 'OUTRIGGER_SOURCE',
    parser: p.source,
    default: { kind: 'kube' },
    describe: 'where Services and EndpointSlices come from',
    scope: 'proxy',
  }),
  kubeconfig: opt<string | undefined>({
    flag: '--kubeconfig <path>',
    env: 'OUTRIGGER_KUBECONFIG',
    parser: p.nonEmpty,
    default: undefined,
    describe:
      'kubeconfig for out-of-cluster API access (default: $KUBECONFIG when not in a pod, else the in-cluster token and CA)',
    scope: 'proxy',
  }),
  namespace: opt<string | undefined>({
    flag: '--namespace <ns>',
    env: 'OUTRIGGER_NAMESPACE',
    parser: p.nonEmpty,
    default: undefined,
    describe: "namespace for short Service names (default: the pod's, from the token directory)",
    scope: 'proxy',
  }),
  tokenDir: opt({
    flag: '--token-dir <dir>',
    env: 'OUTRIGGER_TOKEN_DIR',
    parser: p.nonEmpty,
    default: '/var/run/secrets/outrigger.dev/serviceaccount',
    describe: "directory of the sidecar's projected token (token, ca.crt, namespace)",
    scope: 'proxy',
  }),
  podInfoDir: opt({
    flag: '--pod-info-dir <dir>',
    env: 'OUTRIGGER_POD_INFO_DIR',
    parser: p.nonEmpty,
    default: '/etc/outrigger/podinfo',
    describe: 'downward-API directory holding the pod labels and annotations files',
    scope: 'proxy',
  }),
  capture: opt({
    flag: '--capture <mode>',
    env: 'OUTRIGGER_CAPTURE',
    annotation: a('capture'),
    parser: p.oneOf('transparent', 'explicit'),
    default: 'transparent',
    describe: 'how app traffic reaches the sidecar: iptables redirect or HTTP_PROXY',
    scope: 'proxy',
  }),
  egressPort: opt({
    flag: '--egress-port <port>',
    env: 'OUTRIGGER_EGRESS_PORT',
    parser: p.port,
    default: 7400,
    describe: 'egress listener port (on 127.0.0.1)',
    scope: 'proxy',
  }),
  ingressPort: opt({
    flag: '--ingress-port <port>',
    env: 'OUTRIGGER_INGRESS_PORT',
    parser: p.port,
    default: 7401,
    describe: 'ingress listener port',
    scope: 'proxy',
  }),
  adminPort: opt({
    flag: '--admin-port <port>',
    env: 'OUTRIGGER_ADMIN_PORT',
    parser: p.port,
    default: 7402,
    describe: 'admin listener port (/healthz, /readyz, /metrics, /debug/*)',
    scope: 'proxy',
  }),
  appPorts: opt<number[]>({
    flag: '--app-port <port>',
    env: 'OUTRIGGER_APP_PORTS',
    parser: p.ports,
    default: [],
    describe: 'app port that ingress forwards to on localhost (repeatable; env: comma-separated)',
    repeatable: true,
    scope: 'proxy',
  }),
  snapshot: opt<string | undefined>({
    flag: '--snapshot <path>',
    env: 'OUTRIGGER_SNAPSHOT',
    parser: p.nonEmpty,
    default: undefined,
    describe: 'last-known-good snapshot file (off when unset)',
    scope: 'proxy',
  }),
  snapshotEnabled: opt({
    flag: '--snapshot-enabled <bool>',
    env: 'OUTRIGGER_SNAPSHOT_ENABLED',
    annotation: a('snapshot'),
    parser: p.bool,
    default: true,
    describe: 'whether the injected sidecar keeps a snapshot in an emptyDir',
    scope: 'inject',
  }),
  maxWatches: opt({
    flag: '--max-watches <n>',
    env: 'OUTRIGGER_MAX_WATCHES',
    annotation: a('max-watches'),
    parser: p.intRange(1, 100_000),
    default: 500,
    describe: 'LRU bound on live Service subscriptions (watches on the API server)',
    scope: 'proxy',
  }),
  traceEndpoint: opt<string | undefined>({
    flag: '--trace-collector <url>',
    env: 'OUTRIGGER_TRACE_COLLECTOR',
    annotation: a('trace-collector'),
    parser: p.url,
    default: 'http://jaeger.observability:4318/',
    describe:
      'OTLP/HTTP collector base URL (/v1/traces is appended); default: the Jaeger Service of manifests/examples',
    scope: 'proxy',
    was: { flag: '--trace-endpoint <url>', env: 'OUTRIGGER_TRACE_ENDPOINT' },
  }),
  serviceName: opt<string | undefined>({
    flag: '--service-name <name>',
    env: 'OUTRIGGER_SERVICE_NAME',
    annotation: a('service-name'),
    parser: p.nonEmpty,
    default: undefined,
    describe:
      'service.name of spans (default: label app.kubernetes.io/name, else label app, else the workload)',
    scope: 'proxy',
  }),
  traceSampling: opt({
    flag: '--trace-sampling <ratio>',
    env: 'OUTRIGGER_TRACE_SAMPLING',
    annotation: a('trace-sampling'),
    parser: p.ratio,
    default: 0.01,
    describe: 'parent-based sampling ratio for new traces (0 disables spans)',
    live: true,
    scope: 'proxy',
  }),
  clusterDomain: opt({
    flag: '--cluster-domain <domain>',
    env: 'OUTRIGGER_CLUSTER_DOMAIN',
    parser: p.nonEmpty,
    default: 'cluster.local',
    describe: 'cluster DNS suffix',
    scope: 'proxy',
  }),
  zone: opt<string | undefined>({
    flag: '--zone <zone>',
    env: 'OUTRIGGER_ZONE',
    parser: p.nonEmpty,
    default: undefined,
    describe:
      "this pod's zone for topology-aware routing (default: the pod label topology.kubernetes.io/zone, copied from the node by Kubernetes' PodTopologyLabelsAdmission, beta in 1.35)",
    scope: 'proxy',
  }),
  logLevel: opt({
    flag: '--log-level <level>',
    env: 'OUTRIGGER_LOG_LEVEL',
    annotation: a('log-level'),
    parser: p.oneOf('debug', 'info', 'warn', 'error'),
    default: 'info',
    describe: 'structured JSON log level',
    live: true,
    scope: 'proxy',
  }),
  egressPolicy: opt({
    flag: '--egress-policy <policy>',
    env: 'OUTRIGGER_EGRESS_POLICY',
    annotation: a('egress-policy'),
    parser: p.oneOf('allow-all', 'cluster-only'),
    default: 'allow-all',
    describe: 'what egress does with destinations that are not cluster Services (cluster-only answers 403)',
    scope: 'proxy',
  }),
  balancer: opt({
    flag: '--balancer <algorithm>',
    env: 'OUTRIGGER_BALANCER',
    annotation: a('balancer'),
    parser: p.oneOf('p2c-ewma', 'round-robin'),
    default: 'p2c-ewma',
    describe: 'load-balancing algorithm',
    scope: 'proxy',
  }),
  retryStatuses: opt<number[]>({
    flag: '--retry-statuses <codes>',
    env: 'OUTRIGGER_RETRY_STATUSES',
    annotation: a('retry-statuses'),
    parser: {
      allowed: 'comma-separated HTTP statuses from 500 to 599, e.g. 502,503 (empty: none)',
      parse: (raw: string) =>
        raw.trim() === ''
          ? []
          : raw.split(',').map((part) => {
              const n = /^\s*5\d\d\s*$/.test(part) ? Number(part) : NaN;
              if (Number.isNaN(n)) throw new p.ValueError();
              return n;
            }),
    },
    default: [],
    describe: 'statuses on which idempotent requests without a body are retried on another endpoint',
    scope: 'proxy',
  }),
  connectTimeoutMs: opt({
    ...timeoutMs('connect', 600_000),
    default: 1_000,
    describe: 'upstream connect timeout',
    scope: 'proxy',
  }),
  requestTimeoutMs: opt({
    ...timeoutMs('request', 3_600_000),
    default: 30_000,
    describe: 'upstream response-headers timeout (504 after it)',
    scope: 'proxy',
  }),
  idleTimeoutMs: opt({
    ...timeoutMs('idle', 3_600_000),
    default: 60_000,
    describe: 'idle timeout for client and upstream keep-alive connections',
    scope: 'proxy',
  }),
  // Kept in seconds, as the drain code counts it.
  drainSeconds: opt({
    flag: '--drain-duration <duration>',
    env: 'OUTRIGGER_DRAIN_DURATION',
    parser: p.inSeconds(p.duration(0, 3_600_000)),
    default: 25,
    describe: 'after SIGTERM: how long egress keeps serving while the app shuts down',
    scope: 'proxy',
    was: { flag: '--drain-seconds <s>', env: 'OUTRIGGER_DRAIN_SECONDS', parser: p.intRange(0, 3_600) },
  }),
  heapStep: opt({
    flag: '--heap-step <size>',
    env: 'OUTRIGGER_HEAP_STEP',
    annotation: a('heap-step'),
    parser: p.sizeOrOff(1024 ** 2, 1024 ** 3),
    default: 0,
    describe:
      'run a full garbage collection whenever the heap has grown this much since the last one: less memory under load for more CPU (docs/injection.md); 0 leaves it to V8',
    scope: 'proxy',
  }),
  inject: opt({
    flag: '--inject <bool>',
    env: 'OUTRIGGER_INJECT',
    annotation: INJECT_ANNOTATION,
    parser: p.bool,
    default: true,
    describe: 'pod opt-out of injection in an opted-in namespace',
    scope: 'inject',
  }),
  excludeInboundPorts: opt<string[]>({
    flag: '--exclude-inbound-ports <ports>',
    env: 'OUTRIGGER_EXCLUDE_INBOUND_PORTS',
    annotation: a('exclude-inbound-ports'),
    parser: p.portList,
    default: [],
    describe: 'inbound ports that bypass the sidecar (transparent mode)',
    scope: 'inject',
  }),
  excludeOutboundPorts: opt<string[]>({
    flag: '--exclude-outbound-ports <ports>',
    env: 'OUTRIGGER_EXCLUDE_OUTBOUND_PORTS',
    annotation: a('exclude-outbound-ports'),
    parser: p.portList,
    default: [],
    describe: 'outbound ports that bypass the sidecar (transparent mode)',
    scope: 'inject',
  }),
  excludeInboundCidrs: opt<string[]>({
    flag: '--exclude-inbound-cidrs <cidrs>',
    env: 'OUTRIGGER_EXCLUDE_INBOUND_CIDRS',
    annotation: a('exclude-inbound-cidrs'),
    parser: p.cidrList,
    default: [],
    describe: 'inbound source CIDRs that bypass the sidecar (transparent mode)',
    scope: 'inject',
  }),
  excludeOutboundCidrs: opt<string[]>({
    flag: '--exclude-outbound-cidrs <cidrs>',
    env: 'OUTRIGGER_EXCLUDE_OUTBOUND_CIDRS',
    annotation: a('exclude-outbound-cidrs'),
    parser: p.cidrList,
    default: [],
    describe: 'outbound destination CIDRs that bypass the sidecar (transparent mode)',
    scope: 'inject',
  }),
  proxyCpu: opt({
    flag: '--proxy-cpu <quantity>',
    env: 'OUTRIGGER_PROXY_CPU',
    annotation: a('proxy-cpu'),
    parser: p.quantity,
    default: '100m',
    describe: 'sidecar CPU request',
    scope: 'inject',
  }),
  proxyMemory: opt({
    flag: '--proxy-memory <quantity>',
    env: 'OUTRIGGER_PROXY_MEMORY',
    annotation: a('proxy-memory'),
    parser: p.quantity,
    default: '96Mi',
    describe: 'sidecar memory request (docs/injection.md says how to size it)',
    scope: 'inject',
  }),
  proxyMemoryLimit: opt({
    flag: '--proxy-memory-limit <quantity>',
    env: 'OUTRIGGER_PROXY_MEMORY_LIMIT',
    annotation: a('proxy-memory-limit'),
    parser: p.quantity,
    default: '192Mi',
    describe: 'sidecar memory limit; never below the request',
    scope: 'inject',
  }),
  proxyImage: opt({
    flag: '--proxy-image <image>',
    env: 'OUTRIGGER_PROXY_IMAGE',
    parser: p.nonEmpty,
    default: 'ghcr.io/outrigger-mesh/outrigger:0.1.0',
    describe: 'image of the injected sidecar and iptables init container',
    scope: 'inject',
  }),
  proxyUid: opt({
    flag: '--proxy-uid <uid>',
    env: 'OUTRIGGER_PROXY_UID',
    parser: p.intRange(1, 2_147_483_647),
    default: 2102,
    describe: "the sidecar's user id; the iptables rules let this user's traffic out unredirected",
    scope: 'inject',
  }),
  nativeSidecar: opt({
    flag: '--native-sidecar <bool>',
    env: 'OUTRIGGER_NATIVE_SIDECAR',
    annotation: a('native-sidecar'),
    parser: p.bool,
    default: true,
    describe:
      'inject as a native sidecar (Kubernetes 1.29+); false: a first app container that holds the app until ready',
    scope: 'inject',
  }),
  meshRoutes: opt({
    flag: '--mesh-routes <bool>',
    env: 'OUTRIGGER_MESH_ROUTES',
    annotation: a('mesh-routes'),
    parser: p.bool,
    default: false,
    describe:
      "apply Gateway API HTTPRoutes whose parentRef is a Service (GAMMA) to the app's calls (needs the CRDs; API source only)",
    scope: 'proxy',
  }),
  // Mesh identity and mutual TLS (docs/identity.md).
  mtls: opt({
    flag: '--mtls <mode>',
    env: 'OUTRIGGER_MTLS',
    annotation: a('mtls'),
    parser: p.oneOf('off', 'permissive', 'strict'),
    default: 'off',
    describe:
      'mesh identity and mutual TLS: off; permissive (a certificate from outrigger identity, plaintext still accepted); strict (meshed callers only)',
    scope: 'proxy',
  }),
  meshPort: opt({
    flag: '--mesh-port <port>',
    env: 'OUTRIGGER_MESH_PORT',
    parser: p.port,
    default: 7403,
    describe: 'mutual-TLS listener for meshed callers (the same on every pod)',
    scope: 'proxy',
  }),
  appProbes: opt<Record<string, p.AppProbe>>({
    flag: '--app-probes <json>',
    env: 'OUTRIGGER_APP_PROBES',
    parser: p.appProbes,
    default: {},
    describe:
      "the app's original probes, replayed on the admin port at /app-health/... (set by the injector under mtls strict)",
    scope: 'proxy',
  }),
  allowFrom: opt<p.AllowRule[]>({
    flag: '--allow-from <rules>',
    env: 'OUTRIGGER_ALLOW_FROM',
    annotation: a('allow-from'),
    parser: p.allowFrom,
    default: [],
    describe: 'meshed callers allowed in (namespace/serviceaccount or namespace/*); others get 403',
    scope: 'proxy',
  }),
  trustDomain: opt({
    flag: '--trust-domain <name>',
    env: 'OUTRIGGER_TRUST_DOMAIN',
    parser: p.trustDomain,
    default: 'cluster.local',
    describe: 'SPIFFE trust domain of mesh identities',
    scope: 'proxy',
  }),
  identityIssuer: opt({
    flag: '--identity-issuer <url>',
    env: 'OUTRIGGER_IDENTITY_ISSUER',
    parser: p.url,
    default: 'https://outrigger-identity.outrigger-system.svc/',
    describe: 'the outrigger identity certificate issuer',
    scope: 'proxy',
  }),
  identityTokenFile: opt({
    flag: '--identity-token-file <path>',
    env: 'OUTRIGGER_IDENTITY_TOKEN_FILE',
    parser: p.nonEmpty,
    default: '/var/run/secrets/outrigger.dev/identity/token',
    describe: 'projected service-account token of audience outrigger-identity',
    scope: 'proxy',
  }),
  identityDir: opt({
    flag: '--identity-dir <dir>',
    env: 'OUTRIGGER_IDENTITY_DIR',
    parser: p.nonEmpty,
    default: '/var/run/outrigger/identity',
    describe: "where the mesh key and certificate are kept (the pod's in-memory emptyDir)",
    scope: 'proxy',
  }),
  trustBundleFile: opt({
    flag: '--trust-bundle-file <path>',
    env: 'OUTRIGGER_TRUST_BUNDLE_FILE',
    parser: p.nonEmpty,
    default: '/etc/outrigger/trust/ca.crt',
    describe: 'mesh trust roots (PEM), reloaded when the file changes',
    scope: 'proxy',
  }),
} as const;

export type OptionName = keyof typeof options;
export type Config = { [K in OptionName]: (typeof options)[K]['default'] };
