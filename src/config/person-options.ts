import * as p from './parse.ts';
import type { TableSpec } from './resolve.ts';

/**
 * The options of the commands a person runs (install, uninstall, ...), on the same tables as the
 * commands that run in a pod, with one difference: no OUTRIGGER_* variable. A person types flags,
 * as with kubectl, and a variable left exported in a shell must not change what install prints
 * (the kubeconfig alone comes from the environment: KUBECONFIG). NO_ENV is how a table row says so.
 */
export const NO_ENV = '';

export type PersonSpec<T> = TableSpec<T> & { describe: string; repeatable?: boolean };

export const person = <T>(o: Omit<PersonSpec<T>, 'env'>): PersonSpec<T> => ({ ...o, env: NO_ENV });

/** A switch: present is true. */
export const personSwitch = (flag: string, describe: string): PersonSpec<boolean> =>
  person({ flag, parser: p.bool, default: false, describe });

export const KUBECONFIG_HELP = 'kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)';

/** --kubeconfig, shared by every command a person runs against a cluster. */
export const kubeconfigOption = (): PersonSpec<string | undefined> =>
  person<string | undefined>({
    flag: '--kubeconfig <path>',
    parser: p.nonEmpty,
    default: undefined,
    describe: KUBECONFIG_HELP,
  });

/** --namespaces NS[,NS], checked by the command (an RFC 1123 label each; blanks dropped). */
const namespaceList: p.Parser<string> = { allowed: 'comma-separated namespace names', parse: (raw) => raw };
export const namespacesOption = (describe: string): PersonSpec<string | undefined> =>
  person<string | undefined>({
    flag: '--namespaces <ns,...>',
    parser: namespaceList,
    default: undefined,
    describe,
  });

/** --json and kubectl's -o json / --output json, which mean the same. */
export const outputOptions = (json = 'machine-readable JSON output') => ({
  json: personSwitch('--json', json),
  output: person({
    flag: '-o, --output <format>',
    parser: p.oneOf('text', 'json'),
    default: 'text',
    describe: 'output format',
  }),
});

export const ADMIN_HELP = 'admin API base URL or HOST:PORT (loopback: run inside the pod, or port-forward)';

/** A sidecar's admin API, for the commands that read one. */
export const adminOption = (describe: (help: string) => string): PersonSpec<string | undefined> =>
  person<string | undefined>({
    flag: '--admin <url>',
    parser: p.nonEmpty,
    default: undefined,
    describe: describe(ADMIN_HELP),
  });

/** `outrigger check`. */
export const checkOptions = {
  kubeconfig: kubeconfigOption(),
  admin: adminOption(
    (help) => `also check a running sidecar's discovery and token through its admin API: ${help}`,
  ),
  ...outputOptions(),
};
export type CheckConfig = { [K in keyof typeof checkOptions]: (typeof checkOptions)[K]['default'] };

/** `outrigger version`. */
export const versionOptions = {
  admin: adminOption((help) => `${help}; e.g. 127.0.0.1:7402`),
  client: personSwitch('--client', 'only this client: no kubeconfig, no API call'),
  kubeconfig: kubeconfigOption(),
  ...outputOptions(),
};
export type VersionConfig = { [K in keyof typeof versionOptions]: (typeof versionOptions)[K]['default'] };

export const ADMIN_DEFAULT = 'http://127.0.0.1:7402';

/** `outrigger status`. */
export const statusOptions = {
  admin: person({ flag: '--admin <url>', parser: p.nonEmpty, default: ADMIN_DEFAULT, describe: ADMIN_HELP }),
  namespace: person<string | undefined>({
    flag: '-n, --namespace <ns>',
    parser: p.nonEmpty,
    default: undefined,
    describe: "the sidecars of this namespace's injected pods, through the API server's pod proxy",
  }),
  allNamespaces: personSwitch(
    '-A, --all-namespaces',
    'the sidecars of every injected pod, through the API server',
  ),
  kubeconfig: { ...kubeconfigOption(), describe: `with -n or -A: ${KUBECONFIG_HELP}` },
  ...outputOptions('print the raw /debug/discovery JSON (with -n or -A: the rows as JSON)'),
};
export type StatusConfig = { [K in keyof typeof statusOptions]: (typeof statusOptions)[K]['default'] };

/** `outrigger demo`: no cluster, so no kubeconfig. */
export const DEMO_REQUESTS_MAX = 10_000;
export const demoOptions = {
  requests: person({
    flag: '--requests <n>',
    parser: p.intRange(1, DEMO_REQUESTS_MAX),
    default: 40,
    describe: `requests per balanced route, 1 to ${DEMO_REQUESTS_MAX}`,
  }),
  keepRunning: personSwitch(
    '--keep-running',
    'after the table, keep the backends and the sidecar up for your own requests',
  ),
};
export type DemoConfig = { [K in keyof typeof demoOptions]: (typeof demoOptions)[K]['default'] };

/** `outrigger resolve NAME[:PORT]`. */
export const resolveOptions = {
  ...outputOptions(),
  kubeconfig: kubeconfigOption(),
  namespace: person<string | undefined>({
    flag: '-n, --namespace <ns>',
    parser: p.nonEmpty,
    default: undefined,
    describe: "namespace for a short name (default: the kubeconfig context's, else default)",
  }),
  source: person<ReturnType<typeof p.source.parse> | undefined>({
    flag: '--source <kube|file:PATH>',
    parser: p.source,
    default: undefined,
    describe: 'resolve from a YAML file instead of the API server (default: kube)',
  }),
  clusterDomain: person({
    flag: '--cluster-domain <domain>',
    parser: p.nonEmpty,
    default: 'cluster.local',
    describe: 'cluster DNS suffix',
  }),
  wait: person({
    flag: '--wait <duration>',
    parser: p.duration(0, 3_600_000),
    default: 5_000,
    describe: 'how long to wait for the first answer',
    was: { flag: '--wait-ms <ms>', parser: p.countOf('ms', 0, 3_600_000) },
  }),
};
export type ResolveConfig = { [K in keyof typeof resolveOptions]: (typeof resolveOptions)[K]['default'] };

/** `outrigger inject`'s own options; the pod's shape comes from the sidecar's rows (src/cli/inject.ts). */
export const injectOptions = {
  filename: person<string[]>({
    flag: '-f, --filename <file...>',
    parser: p.pathList,
    default: [],
    describe: "manifest files or directories of them, '-' for stdin (required)",
    repeatable: true,
  }),
  namespace: person({
    flag: '-n, --namespace <ns>',
    parser: p.namespaceName,
    default: 'default',
    describe: 'namespace of objects that name none',
  }),
  podSecurity: person<'privileged' | 'baseline' | 'restricted' | undefined>({
    flag: '--pod-security <level>',
    parser: p.oneOf('privileged', 'baseline', 'restricted'),
    default: undefined,
    describe: 'Pod Security level the target namespace enforces',
  }),
};
export type InjectConfig = { [K in keyof typeof injectOptions]: (typeof injectOptions)[K]['default'] };
