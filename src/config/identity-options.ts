import { INJECTION_LABEL, TRUST_BUNDLE_CONFIGMAP, options as sidecar } from './options.ts';
import { httpsListener, portOfAdminListen, shutdownDelay, type ServerSpec } from './server-options.ts';
import * as p from './parse.ts';

/**
 * The settings of `outrigger identity`, the mesh certificate issuer: each a flag and an
 * OUTRIGGER_<FLAG> variable (docs/cli.md). Before 0.2 the variables were OUTRIGGER_IDENTITY_<FLAG>
 * and the listeners `--listen HOST:PORT` and `--admin-listen HOST:PORT`; those still work for one
 * release, with a warning.
 */
const opt = <T>(o: ServerSpec<T>): ServerSpec<T> => o;
const old = (name: string): string => `OUTRIGGER_IDENTITY_${name}`;

const commaList = {
  allowed: 'comma-separated DNS names, at least one',
  parse(raw: string): string[] {
    const names = raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    if (names.length === 0) throw new p.ValueError();
    return names;
  },
};

// Label-selector characters only (keys, values, = != , in/notin lists, !key): a typo fails at
// start-up, not as an API error on every distribution round.
const selector = {
  allowed: 'a label selector such as outrigger.dev/injection=enabled, or "" for none',
  parse(raw: string): string {
    if (!/^[A-Za-z0-9_./=!,() -]*$/.test(raw)) throw new p.ValueError();
    return raw.trim();
  },
};

export const identityOptions = {
  ...httpsListener(old('LISTEN'), 8443),
  adminPort: opt<number | undefined>({
    flag: '--admin-port <port>',
    env: 'OUTRIGGER_ADMIN_PORT',
    parser: p.portOrOff,
    default: 7402,
    describe: 'plain HTTP admin port: /metrics, /healthz, and /debug answered on loopback only',
    was: { flag: '--admin-listen <host:port>', env: old('ADMIN_LISTEN'), parser: portOfAdminListen },
  }),
  trustBundleNamespaces: opt({
    flag: '--trust-bundle-namespaces <selector>',
    env: 'OUTRIGGER_TRUST_BUNDLE_NAMESPACES',
    parser: selector,
    default: `${INJECTION_LABEL}=enabled`,
    describe: `label selector of the namespaces that get the trust-bundle ConfigMap ${TRUST_BUNDLE_CONFIGMAP}; "" for none`,
    was: { env: old('TRUST_BUNDLE_NAMESPACES') },
  }),
  caCert: opt({
    flag: '--ca-cert <file>',
    env: 'OUTRIGGER_CA_CERT',
    parser: p.nonEmpty,
    default: '/etc/outrigger/ca/tls.crt',
    describe: 'signing CA certificate, then its intermediates (PEM)',
    was: { env: old('CA_CERT') },
  }),
  caKey: opt({
    flag: '--ca-key <file>',
    env: 'OUTRIGGER_CA_KEY',
    parser: p.nonEmpty,
    default: '/etc/outrigger/ca/tls.key',
    describe: 'signing CA key (PEM)',
    was: { env: old('CA_KEY') },
  }),
  trustBundle: opt<string | undefined>({
    flag: '--trust-bundle <file>',
    env: 'OUTRIGGER_TRUST_BUNDLE',
    parser: p.nonEmpty,
    default: undefined,
    describe: 'roots sidecars trust (PEM) (default: --ca-cert when it is a self-signed root)',
    was: { env: old('TRUST_BUNDLE') },
  }),
  trustDomain: opt({
    flag: '--trust-domain <name>',
    env: 'OUTRIGGER_TRUST_DOMAIN',
    parser: p.trustDomain,
    default: 'cluster.local',
    describe: 'SPIFFE trust domain of issued ids',
    was: { env: old('TRUST_DOMAIN') },
  }),
  audience: opt({
    flag: '--audience <aud>',
    env: 'OUTRIGGER_AUDIENCE',
    parser: p.nonEmpty,
    default: 'outrigger-identity',
    describe: 'audience sidecar tokens must carry',
    was: { env: old('AUDIENCE') },
  }),
  certTtl: opt({
    flag: '--cert-ttl <duration>',
    env: 'OUTRIGGER_CERT_TTL',
    parser: p.duration(60_000, 90 * 86_400_000),
    default: 86_400_000,
    describe: 'lifetime of issued certificates',
    was: { env: old('CERT_TTL') },
  }),
  servingNames: opt({
    flag: '--serving-names <names>',
    env: 'OUTRIGGER_SERVING_NAMES',
    parser: commaList,
    default: [
      'outrigger-identity.outrigger-system.svc',
      'outrigger-identity.outrigger-system.svc.cluster.local',
    ],
    describe: "comma-separated DNS names of the issuer's Service (its serving certificate)",
    was: { env: old('SERVING_NAMES') },
  }),
  allowUnboundTokens: opt({
    flag: '--allow-unbound-tokens',
    env: 'OUTRIGGER_ALLOW_UNBOUND_TOKENS',
    parser: p.bool,
    default: false,
    describe: 'also accept tokens bound to no pod (not recommended)',
    was: { env: old('ALLOW_UNBOUND_TOKENS') },
  }),
  kubeconfig: opt<string | undefined>({
    flag: '--kubeconfig <path>',
    env: 'OUTRIGGER_KUBECONFIG',
    parser: p.nonEmpty,
    default: undefined,
    describe: 'out-of-cluster API access (default: $KUBECONFIG, else in-cluster)',
  }),
  tokenDir: opt({
    flag: '--token-dir <dir>',
    env: 'OUTRIGGER_TOKEN_DIR',
    parser: p.nonEmpty,
    default: '/var/run/secrets/kubernetes.io/serviceaccount',
    describe: "the issuer's own service-account token (in-cluster)",
    was: { env: old('TOKEN_DIR') },
  }),
  logLevel: opt({
    flag: sidecar.logLevel.flag,
    env: sidecar.logLevel.env,
    parser: sidecar.logLevel.parser,
    default: sidecar.logLevel.default,
    describe: sidecar.logLevel.describe,
    was: { env: old('LOG_LEVEL') },
  }),
  shutdownDelay: shutdownDelay(old('SHUTDOWN_DELAY_SECONDS')),
};

export type IdentityOptionName = keyof typeof identityOptions;
export type IdentityConfig = { [K in IdentityOptionName]: (typeof identityOptions)[K]['default'] };
