/**
 * `outrigger identity`, the certificate issuer: the CA from files, TokenReview through the kube
 * client (in-cluster token or a kubeconfig), the HTTPS server, the trust bundle kept in every
 * meshed namespace, /metrics on a plain admin port, and a shutdown that keeps answering while the
 * Service's endpoints drop this replica.
 */
import { inClusterServer } from '../token/in-cluster.ts';
import { openTokenSource } from '../token/token-source.ts';
import type { KubeConnection } from '../kube/connection.ts';
import { podTokenConnection } from '../kube/in-cluster.ts';
import { tokenReviewer } from '../kube/token-review.ts';
import { AdminServer } from '../admin/server.ts';
import { IssuerMetrics } from '../admin/issuer-metrics.ts';
import { TRUST_BUNDLE_CONFIGMAP, TRUST_BUNDLE_KEY } from '../config/options.ts';
import { configMapsApi } from '../kube/config-maps.ts';
import { BundleDistributor } from '../mesh/bundle-distributor.ts';
import { earliestExpiry, loadCa } from '../mesh/ca.ts';
import { TrustBundle } from '../mesh/trust-bundle.ts';
import { Issuer } from '../mesh/issuer.ts';
import { startIssuerServer, type IssuerServer } from '../mesh/issuer-server.ts';
import { systemClock, systemRandom, type Clock } from '../shared/clock.ts';
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
  /** Plain HTTP: /metrics, /healthz, /debug (loopback). Absent: no admin listener. */
  admin?: { host: string; port: number };
  /** Namespaces that get the trust-bundle ConfigMap (a label selector); absent: not distributed. */
  bundleNamespaces?: string;
  bundleResyncMs?: number;
}

export interface RunningIssuer {
  server: IssuerServer;
  adminPort: number | undefined;
  distributor: BundleDistributor | undefined;
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
    const { kubeconfigConnection } = await import('../kube/kubeconfig.ts');
    conn = await kubeconfigConnection(opts.kubeconfig);
  } else if (!conn) {
    const token = await openTokenSource({ dir: opts.tokenDir, clock, logger: deps.log });
    closeToken = () => token.close();
    conn = podTokenConnection(inClusterServer(deps.env ?? process.env), token);
  }
  const reviewer = tokenReviewer(conn);
  // The roots as the CA Secret holds them now: a rotation reaches the namespaces without a restart.
  const bundle = new TrustBundle({ file: opts.trustBundle ?? opts.caCert, clock, log: deps.log });
  await bundle.start();
  const distributor = opts.bundleNamespaces
    ? startDistribution(conn, bundle, opts.bundleNamespaces, opts.bundleResyncMs ?? 60_000, {
        ...deps,
        clock,
      })
    : undefined;
  const metrics = new IssuerMetrics(() => ({
    caNotAfter: ca.notAfter,
    bundleNotAfter: earliestExpiry(bundle.pem()),
    ...(distributor ? { distribution: distributor.view() } : {}),
  }));
  distributor?.observe(metrics);
  const issuer = new Issuer({
    ca,
    reviewer,
    trustDomain: opts.trustDomain,
    audience: opts.audience,
    ttlMs: opts.ttlMs,
    clock,
    log: deps.log,
    requireBoundPod: opts.requireBoundPod,
    observer: metrics,
  });
  const server = await startIssuerServer({
    host: opts.host,
    port: opts.port,
    issuer,
    ca,
    servingNames: opts.servingNames,
    clock,
    log: deps.log,
    observer: metrics,
  });
  const admin = opts.admin
    ? new AdminServer({
        ...opts.admin,
        readiness: () => ({ ready: true, detail: {} }),
        metrics,
        debug: {
          issuer: () => server.stats(),
          ...(distributor ? { 'trust-bundle': () => distributor.view() } : {}),
        },
      })
    : undefined;
  await admin?.start();
  let closing: Promise<void> | undefined;
  return {
    server,
    adminPort: admin?.port(),
    distributor,
    close: () =>
      (closing ??= Promise.all([server.close(), admin?.close()]).then(() => {
        distributor?.close();
        bundle.close();
        reviewer.close();
        closeToken();
      })),
  };
}

function startDistribution(
  conn: KubeConnection,
  bundle: TrustBundle,
  namespaceSelector: string,
  resyncMs: number,
  deps: { log: Logger; clock: Clock },
): BundleDistributor {
  const api = configMapsApi(conn);
  const distributor = new BundleDistributor({
    api,
    bundle: () => bundle.pem(),
    namespaceSelector,
    name: TRUST_BUNDLE_CONFIGMAP,
    key: TRUST_BUNDLE_KEY,
    resyncMs,
    clock: deps.clock,
    random: systemRandom,
    log: deps.log.child({ component: 'trust-bundle-distribution' }),
    onClose: () => api.close(),
  });
  bundle.onChange(() => distributor.kick());
  distributor.start();
  return distributor;
}
