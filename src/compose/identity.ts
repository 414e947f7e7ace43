/**
 * `outrigger identity`, the certificate issuer: the CA from files, TokenReview through the kube
 * client (in-cluster token or a kubeconfig), the HTTPS server, and a shutdown that keeps answering
 * while the Service's endpoints drop this replica.
 */
import { inClusterServer } from '../identity/in-cluster.ts';
import { openTokenSource } from '../identity/token-source.ts';
import type { KubeConnection } from '../discovery/kube/connection.ts';
import { identityConnection } from '../discovery/kube/in-cluster.ts';
import { tokenReviewer } from '../discovery/kube/token-review.ts';
import { loadCa } from '../mesh/ca.ts';
import { Issuer } from '../mesh/issuer.ts';
import { startIssuerServer, type IssuerServer } from '../mesh/issuer-server.ts';
import { systemClock, type Clock } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';

export interface IdentityOptions {
  host: string;
  port: number;
  caCert: string;
  caKey: string;
  trustBundle?: string;
  trustDomain: string;
  audience: string;
  ttlMs: number;
  servingNames: string[];
  requireBoundPod: boolean;
  kubeconfig?: string;
  /** The issuer's own service-account token directory (in-cluster). */
  tokenDir: string;
}

export interface RunningIssuer {
  server: IssuerServer;
  close(): Promise<void>;
}

export async function startIdentity(
  opts: IdentityOptions,
  deps: { log: Logger; clock?: Clock; env?: Record<string, string | undefined>; connection?: KubeConnection },
): Promise<RunningIssuer> {
  const clock = deps.clock ?? systemClock;
  const ca = await loadCa(
    {
      certFile: opts.caCert,
      keyFile: opts.caKey,
      ...(opts.trustBundle ? { trustBundleFile: opts.trustBundle } : {}),
    },
    clock.now(),
  );
  let closeToken = (): void => {};
  let conn = deps.connection;
  if (!conn && opts.kubeconfig) {
    const { kubeconfigConnection } = await import('../discovery/kube/kubeconfig.ts');
    conn = await kubeconfigConnection(opts.kubeconfig);
  } else if (!conn) {
    const token = await openTokenSource({ dir: opts.tokenDir, clock, logger: deps.log });
    closeToken = () => token.close();
    conn = identityConnection(inClusterServer(deps.env ?? process.env), token);
  }
  const reviewer = tokenReviewer(conn);
  const issuer = new Issuer({
    ca,
    reviewer,
    trustDomain: opts.trustDomain,
    audience: opts.audience,
    ttlMs: opts.ttlMs,
    clock,
    log: deps.log,
    requireBoundPod: opts.requireBoundPod,
  });
  const server = await startIssuerServer({
    host: opts.host,
    port: opts.port,
    issuer,
    ca,
    servingNames: opts.servingNames,
    clock,
    log: deps.log,
  });
  let closing: Promise<void> | undefined;
  return {
    server,
    close: () =>
      (closing ??= server.close().then(() => {
        reviewer.close();
        closeToken();
      })),
  };
}
