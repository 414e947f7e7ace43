import { isIP } from 'node:net';
import { options as sidecar, type OptionSpec } from './options.ts';
import * as p from './parse.ts';
import { loadTable, type TableInputs } from './resolve.ts';

/** The spec.controller value of the IngressClasses `outrigger gateway` serves by default. */
export const GATEWAY_CONTROLLER = 'outrigger.dev/gateway';

/** The gateway pods' labels (manifests/gateway/deployment.yaml): what the Gateways' Services select. */
export const GATEWAY_POD_LABELS: Readonly<Record<string, string>> = {
  'app.kubernetes.io/name': 'outrigger',
  'app.kubernetes.io/component': 'gateway',
};

/**
 * The settings of `outrigger gateway`, each with a flag and an OUTRIGGER_* variable (no pod
 * annotations: the gateway is configured by its Deployment). The data-path settings it shares with
 * the sidecar (balancer, retries, timeouts, tracing, log level) are the sidecar's own specs, so
 * they parse and read the same. Precedence: flag > env > default; an invalid value is a
 * config_invalid error naming the key, the value and what is allowed.
 */
type Spec<T> = Omit<OptionSpec<T>, 'scope' | 'annotation' | 'live'>;
const opt = <T>(o: Spec<T>): Spec<T> => o;
const shared = <T>(o: OptionSpec<T>, over: Partial<Spec<T>> = {}): Spec<T> => ({
  flag: o.flag,
  env: o.env,
  parser: o.parser,
  default: o.default,
  describe: o.describe,
  ...(o.repeatable ? { repeatable: true } : {}),
  ...(o.was ? { was: o.was } : {}),
  ...over,
});

const namespacedName = {
  allowed: 'namespace/name',
  parse(raw: string): string {
    const v = raw.trim();
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?\/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$/.test(v)) throw new p.ValueError();
    return v;
  },
};

const DNS_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const addressList = {
  allowed: 'comma-separated IP addresses or DNS names, such as 192.0.2.10,lb.example.com',
  parse(raw: string): string[] {
    if (raw.trim() === '') return [];
    return raw.split(',').map((part) => {
      const v = part.trim().toLowerCase();
      if (isIP(v) === 0 && !DNS_NAME.test(v)) throw new p.ValueError();
      return v;
    });
  },
};

export const gatewayOptions = {
  httpPort: opt({
    flag: '--http-port <port>',
    env: 'OUTRIGGER_HTTP_PORT',
    was: { env: 'OUTRIGGER_GATEWAY_HTTP_PORT' },
    parser: p.port,
    default: 8080,
    describe: 'plain HTTP listener port',
  }),
  httpsPort: opt({
    flag: '--https-port <port>',
    env: 'OUTRIGGER_HTTPS_PORT',
    was: { env: 'OUTRIGGER_GATEWAY_HTTPS_PORT' },
    parser: p.port,
    default: 8443,
    describe: 'HTTPS listener port (certificates from the Ingresses spec.tls Secrets, by SNI)',
  }),
  listenHost: opt({
    flag: '--listen-host <address>',
    env: 'OUTRIGGER_LISTEN_HOST',
    was: { env: 'OUTRIGGER_GATEWAY_LISTEN_HOST' },
    parser: p.nonEmpty,
    default: '::',
    describe: 'address the HTTP, HTTPS and admin listeners bind',
  }),
  adminPort: shared(sidecar.adminPort),
  kubeconfig: shared(sidecar.kubeconfig),
  tokenDir: shared(sidecar.tokenDir, {
    default: '/var/run/secrets/kubernetes.io/serviceaccount',
    describe: "directory of the gateway's service-account token (token, ca.crt, namespace)",
  }),
  watchNamespace: opt<string | undefined>({
    flag: '--watch-namespace <ns>',
    env: 'OUTRIGGER_WATCH_NAMESPACE',
    was: { env: 'OUTRIGGER_GATEWAY_WATCH_NAMESPACE' },
    parser: p.nonEmpty,
    default: undefined,
    describe: 'serve the Ingresses of this namespace only (default: all namespaces)',
  }),
  controller: opt({
    flag: '--controller <name>',
    env: 'OUTRIGGER_CONTROLLER',
    was: { env: 'OUTRIGGER_GATEWAY_CONTROLLER' },
    parser: p.nonEmpty,
    default: GATEWAY_CONTROLLER,
    describe: 'spec.controller of the IngressClasses this gateway serves',
  }),
  watchWithoutClass: opt({
    flag: '--watch-ingress-without-class <bool>',
    env: 'OUTRIGGER_WATCH_INGRESS_WITHOUT_CLASS',
    was: { env: 'OUTRIGGER_GATEWAY_WATCH_WITHOUT_CLASS' },
    parser: p.bool,
    default: false,
    describe: 'also serve Ingresses without any class (they are served anyway when our class is the default)',
  }),
  gatewayApi: opt({
    flag: '--gateway-api <bool>',
    env: 'OUTRIGGER_GATEWAY_API',
    was: { env: 'OUTRIGGER_GATEWAY_GATEWAY_API' },
    parser: p.bool,
    default: false,
    describe:
      'also serve Gateway API Gateways, HTTPRoutes and GRPCRoutes of GatewayClasses with this controllerName (needs the standard-channel CRDs)',
  }),
  gatewayServices: opt({
    flag: '--gateway-services <bool>',
    env: 'OUTRIGGER_GATEWAY_SERVICES',
    parser: p.bool,
    default: true,
    describe:
      "with --gateway-api: an address per Gateway, a Service in the gateway's namespace whose ClusterIP is the Gateway's status address (needs create and patch on services there)",
  }),
  podNamespace: opt<string | undefined>({
    flag: '--pod-namespace <ns>',
    env: 'OUTRIGGER_POD_NAMESPACE',
    parser: p.nonEmpty,
    default: undefined,
    describe:
      "the gateway's own namespace, where the Gateways' Services are made (outrigger install sets it from the pod)",
  }),
  defaultCertificate: opt<string | undefined>({
    flag: '--default-certificate <namespace/name>',
    env: 'OUTRIGGER_DEFAULT_CERTIFICATE',
    was: { env: 'OUTRIGGER_GATEWAY_DEFAULT_CERTIFICATE' },
    parser: namespacedName,
    default: undefined,
    describe: 'kubernetes.io/tls Secret served to clients whose SNI no Ingress covers (and without SNI)',
  }),
  snapshotDir: opt<string | undefined>({
    flag: '--snapshot-dir <dir>',
    env: 'OUTRIGGER_SNAPSHOT_DIR',
    was: { env: 'OUTRIGGER_GATEWAY_SNAPSHOT_DIR' },
    parser: p.nonEmpty,
    default: undefined,
    describe:
      'directory for the last-known-good snapshots (routes, Services, TLS keys: use an in-memory emptyDir); off when unset',
  }),
  publishStatusAddress: opt<string[]>({
    flag: '--publish-status-address <addresses>',
    env: 'OUTRIGGER_PUBLISH_STATUS_ADDRESS',
    was: { env: 'OUTRIGGER_GATEWAY_PUBLISH_STATUS_ADDRESS' },
    parser: addressList,
    default: [],
    describe:
      'IPs or hostnames written to status.loadBalancer of every served Ingress (needs patch on ingresses/status); off when empty',
  }),
  maxWatches: shared(sidecar.maxWatches, { default: 5_000 }),
  zone: shared(sidecar.zone),
  balancer: shared(sidecar.balancer),
  retryStatuses: shared(sidecar.retryStatuses),
  connectTimeoutMs: shared(sidecar.connectTimeoutMs),
  requestTimeoutMs: shared(sidecar.requestTimeoutMs),
  idleTimeoutMs: shared(sidecar.idleTimeoutMs),
  drainSeconds: shared(sidecar.drainSeconds, {
    describe: 'after SIGTERM: how long in-flight requests may finish (readiness is already false)',
  }),
  traceEndpoint: shared(sidecar.traceEndpoint),
  traceSampling: shared(sidecar.traceSampling),
  serviceName: shared(sidecar.serviceName, {
    default: 'outrigger-gateway',
    describe: 'service.name of spans',
  }),
  logLevel: shared(sidecar.logLevel),
  // The gateway as a mesh client (docs/gateway.md): an identity of its own from outrigger identity,
  // and mutual TLS to every meshed endpoint, so that workloads under mtls strict accept it.
  mtls: shared(sidecar.mtls, {
    parser: p.oneOf('off', 'on'),
    describe:
      'mesh identity: on (a certificate from outrigger identity, and mutual TLS to meshed endpoints; unready until it holds one); off',
  }),
  meshPort: shared(sidecar.meshPort, { describe: "the meshed pods' mutual-TLS port" }),
  trustDomain: shared(sidecar.trustDomain),
  identityIssuer: shared(sidecar.identityIssuer),
  identityTokenFile: shared(sidecar.identityTokenFile),
  identityDir: shared(sidecar.identityDir, {
    default: '/var/run/outrigger-gateway/identity',
    describe: 'where the mesh key and certificate are kept (an in-memory emptyDir)',
  }),
  trustBundleFile: shared(sidecar.trustBundleFile),
};

export type GatewayOptionName = keyof typeof gatewayOptions;
export type GatewayConfig = { [K in GatewayOptionName]: (typeof gatewayOptions)[K]['default'] };

export function loadGatewayConfig(inputs: TableInputs<GatewayOptionName>): GatewayConfig {
  return loadTable<GatewayOptionName, GatewayConfig>(gatewayOptions, inputs);
}
