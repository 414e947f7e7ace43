/**
 * How to reach and authenticate to the API server, whatever the origin: the pod's projected
 * identity (in-cluster) or a kubeconfig (CLI, out-of-cluster runs).
 */
export interface KubeConnection {
  server: URL;
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** Only from an explicit kubeconfig insecure-skip-tls-verify; never defaulted. */
  rejectUnauthorized?: boolean;
  /** The Authorization header value to send now, if any. Never log it. */
  authorization(): string | undefined;
  /** Called after a 401: refresh credentials. True when they changed, so one retry makes sense. */
  unauthorized(): Promise<boolean>;
}
