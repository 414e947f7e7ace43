/** Names of the control-plane objects in manifests/, shared by `install` and `check`. */
export const CONTROL_PLANE = {
  namespace: 'outrigger-system',
  service: 'outrigger-webhook',
  tlsSecret: 'outrigger-webhook-tls',
  webhookConfiguration: 'outrigger-injector',
  sidecarRole: 'outrigger-sidecar',
} as const;
