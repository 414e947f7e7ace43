/** Every object install makes carries this label; uninstall deletes nothing without it. */
export const OWNED_LABEL = { key: 'app.kubernetes.io/name', value: 'outrigger' } as const;

/** Made by install (a namespace or mesh CA without the label is the user's). */
export const madeByInstall = (o: { metadata?: { labels?: Record<string, string> } } | undefined): boolean =>
  o?.metadata?.labels?.[OWNED_LABEL.key] === OWNED_LABEL.value;

/** Names of the control-plane objects in manifests/, shared by `install`, `uninstall` and `check`. */
export const CONTROL_PLANE = {
  namespace: 'outrigger-system',
  service: 'outrigger-webhook',
  tlsSecret: 'outrigger-webhook-tls',
  webhookConfiguration: 'outrigger-injector',
  sidecarRole: 'outrigger-sidecar',
  /** The argument `install --mesh-routes` gives the webhook: injected pods apply mesh routes by default. */
  meshRoutesArg: '--mesh-routes=true',
  /** manifests/identity, which `install --identity` adds, and the mesh CA it makes. */
  identity: {
    deployment: 'outrigger-identity',
    caSecret: 'outrigger-identity-ca',
    trustBundle: 'outrigger-trust-bundle',
  },
  /** manifests/gateway, which `install --gateway` adds. */
  gateway: {
    namespace: 'outrigger-gateway',
    deployment: 'outrigger-gateway',
    ingressClass: 'outrigger',
    /** The argument `install --gateway-api` gives the gateway's container. */
    gatewayApiArg: '--gateway-api=true',
    /** The argument `install --gateway-mtls` gives it: a mesh client with an identity of its own. */
    mtlsArg: '--mtls=on',
  },
} as const;
