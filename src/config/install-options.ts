import * as p from './parse.ts';
import { kubeconfigOption, namespacesOption, person, personSwitch } from './person-options.ts';

/**
 * The options of `outrigger install` and `outrigger uninstall` (docs/cli.md): flags only, no
 * OUTRIGGER_* variable (person-options.ts says why).
 */
const DAY_MS = 86_400_000;

export const installOptions = {
  image: person<string | undefined>({
    flag: '--image <image>',
    parser: p.nonEmpty,
    default: undefined,
    describe:
      'image of the webhook and of the injected sidecars (default: the installed one, else the one in manifests/)',
  }),
  namespaces: namespacesOption(
    'namespaces to mesh: their ServiceAccounts are bound to the sidecar role, and the label command is printed on stderr (the opted-in ones are always included)',
  ),
  webhookUrl: person<string | undefined>({
    flag: '--webhook-url <url>',
    parser: p.url,
    default: undefined,
    describe:
      'call a webhook you run yourself at this https:// URL instead of the in-cluster Deployment (default: the installed URL)',
  }),
  inClusterWebhook: personSwitch(
    '--in-cluster-webhook',
    'call the in-cluster webhook Deployment, also when the installed configuration calls a URL',
  ),
  gateway: personSwitch(
    '--gateway',
    'also the Ingress gateway (manifests/gateway: its namespace, Deployment, Service, IngressClass, RBAC) on the same image; a re-run keeps an installed gateway',
  ),
  gatewayApi: personSwitch(
    '--gateway-api',
    'the gateway also serves Gateway API Gateways, HTTPRoutes and GRPCRoutes (implies --gateway; adds its RBAC and the GatewayClass outrigger; the CRDs are yours to install); a re-run keeps it',
  ),
  gatewayMtls: personSwitch(
    '--gateway-mtls',
    'the gateway is a mesh client: a certificate from outrigger identity, and mutual TLS to meshed pods, so that pods under mtls strict accept it (implies --gateway); a re-run keeps it',
  ),
  meshRoutes: personSwitch(
    '--mesh-routes',
    'injected pods apply HTTPRoutes attached to Services (GAMMA) by default: the webhook writes outrigger.dev/mesh-routes: "true" on pods that do not set it; a re-run keeps it',
  ),
  identity: personSwitch(
    '--identity',
    'also the mesh certificate issuer (manifests/identity) and a new mesh CA: a root, whose key is not kept, and an issuing CA in Secret outrigger-identity-ca; a re-run keeps both, and an installed CA of your own (scripts/gen-mesh-ca)',
  ),
  rotateCertificate: personSwitch(
    '--rotate-certificate',
    'issue a new webhook CA and certificate; without it the installed ones are kept unless they expire within 30 days or do not match the webhook names',
  ),
  certTtl: person({
    flag: '--cert-ttl <duration>',
    parser: p.duration(DAY_MS, 3650 * DAY_MS),
    default: 365 * DAY_MS,
    describe: 'lifetime of a newly issued serving certificate (the CA lives 3 times as long)',
    was: { flag: '--cert-days <days>', parser: p.countOf('d', DAY_MS, 3650 * DAY_MS) },
  }),
  kubeconfig: kubeconfigOption(),
};

export type InstallOptionName = keyof typeof installOptions;
export type InstallConfig = { [K in InstallOptionName]: (typeof installOptions)[K]['default'] };

export const uninstallOptions = {
  namespaces: namespacesOption(
    'meshed namespaces whose sidecar bindings and label to remove when no cluster is read (with a kubeconfig they are found by their labels)',
  ),
  kubeconfig: kubeconfigOption(),
};

export type UninstallOptionName = keyof typeof uninstallOptions;
export type UninstallConfig = { [K in UninstallOptionName]: (typeof uninstallOptions)[K]['default'] };
