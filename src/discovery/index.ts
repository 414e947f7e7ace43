import type { Config } from '../config/options.ts';
import { inClusterServer } from '../token/in-cluster.ts';
import { openTokenSource, type PodToken } from '../token/token-source.ts';
import type { Clock, Random } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import type { KubeConnection } from '../kube/connection.ts';
import { podTokenConnection } from '../kube/in-cluster.ts';
import { chooseProtocol } from '../kube/senders.ts';
import { createTransport, type KubeTransport } from '../kube/transport.ts';
import { reflectorsOf, type NewReflector } from './reflectors.ts';
import { createKubeResolver, type KubeResolver, type KubeResolverOptions } from './resolver.ts';
import type { Resolver } from './types.ts';

export type { Resolver } from './types.ts';

export interface DiscoveryDeps {
  clock: Clock;
  random: Random;
  logger: Logger;
  /** process.env, for KUBERNETES_SERVICE_HOST/PORT. */
  env: Record<string, string | undefined>;
  /** Tuning for tests (backoff, timeouts); production uses the defaults. */
  tuning?: Pick<
    KubeResolverOptions,
    'reflector' | 'waitMs' | 'snapshotDebounceMs' | 'coldBytes' | 'sliceBatchMs'
  >;
}

export interface Discovery extends Resolver {
  /** The namespace short names resolve in: --namespace, else the token's, else the kubeconfig's. */
  readonly namespace: string;
  /** More collections on the same API connection and tuning (absent with the file source). */
  readonly reflectors?: NewReflector;
  /** Another component's objects in the same snapshot file (absent with the file source). */
  readonly keepInSnapshot?: KubeResolver['keepInSnapshot'];
}

export type DiscoveryConfig = Pick<
  Config,
  'source' | 'kubeconfig' | 'tokenDir' | 'namespace' | 'capture' | 'maxWatches' | 'snapshot'
>;

export interface KubeLink {
  transport: KubeTransport;
  /** What the transport speaks: decides how long watches may live (watchTimeoutFor). */
  protocol: 'h1' | 'h2';
  identity: PodToken | undefined;
  /** The token's or the kubeconfig's namespace, when known. */
  namespace: string | undefined;
  close(): void;
}

/**
 * The API connection discovery reads through: in-cluster (projected token + KUBERNETES_SERVICE_HOST
 * and _PORT, both required) or with --kubeconfig; no fallback from one to the other. The gateway
 * shares one link between its Ingress reflectors and its Service resolver.
 */
export async function connectKube(
  config: Pick<Config, 'kubeconfig' | 'tokenDir'>,
  deps: Pick<DiscoveryDeps, 'clock' | 'logger' | 'env'>,
): Promise<KubeLink> {
  let conn: KubeConnection;
  let identity: PodToken | undefined;
  let namespace: string | undefined;
  if (config.kubeconfig) {
    const { kubeconfigConnection } = await import('../kube/kubeconfig.ts');
    const kc = await kubeconfigConnection(config.kubeconfig);
    conn = kc;
    namespace = kc.namespace;
  } else {
    const server = inClusterServer(deps.env);
    identity = await openTokenSource({ dir: config.tokenDir, clock: deps.clock, logger: deps.logger });
    conn = podTokenConnection(server, identity);
    namespace = identity.namespace();
  }
  const protocol = await chooseProtocol(conn);
  const transport = createTransport(conn, { protocol });
  return {
    transport,
    protocol,
    identity,
    namespace,
    close: () => {
      transport.close();
      identity?.close();
    },
  };
}

/**
 * Server-side watch timeouts, drawn per watch. Renewing a watch costs one request, so a fleet's
 * idle load is (watches / mean timeout). Over HTTP/2 a dead connection is found by the transport's
 * pings (30 s + 15 s) whatever the timeout, so watches can live 30-60 min (about 1.3 requests per
 * watch per hour). Over HTTP/1.1 nothing but the timeout (plus 30 s of silence) finds a half-open
 * connection, so it keeps client-go's 5-10 min.
 */
export function watchTimeoutFor(protocol: 'h1' | 'h2'): [number, number] {
  return protocol === 'h2' ? [1800, 3600] : [300, 600];
}

/** An app's first calls come in a burst: subscriptions within this window share one re-watch. */
const SLICE_BATCH_MS = 50;

/**
 * After an API server restart every sidecar relists (their resourceVersions are gone): each
 * relist waits a random 0-10 s, so a fleet's wave is spread over 10 s instead of arriving at
 * once. Data stays served (stale) meanwhile.
 */
const RELIST_SPREAD_MS = 10_000;

/**
 * After an outage every reconnect, a resumed watch as much as a relist, waits a random 0-10 s once
 * the sidecar sees the API answer again (one spread per reconnect, never two in a row).
 */
const RECONNECT_SPREAD_MS = 10_000;

/**
 * The one factory the composition root calls. `--source file:PATH` gives the file resolver;
 * otherwise the API resolver, in-cluster (projected token + KUBERNETES_SERVICE_HOST/PORT, both
 * required) or with --kubeconfig. There is no fallback from one to the other.
 */
export async function createDiscovery(config: DiscoveryConfig, deps: DiscoveryDeps): Promise<Discovery> {
  if (config.source.kind === 'file') {
    const { createFileResolver } = await import('./file-source.ts');
    const r = createFileResolver({ path: config.source.path, clock: deps.clock, logger: deps.logger });
    return Object.assign(r, { namespace: config.namespace ?? 'default' });
  }
  const link = await connectKube(config, deps);
  const { transport, identity, namespace, protocol } = link;
  const ns = config.namespace ?? namespace ?? 'default';
  const reflector = {
    watchTimeoutS: watchTimeoutFor(protocol),
    relistSpreadMs: RELIST_SPREAD_MS,
    recoverySpreadMs: RECONNECT_SPREAD_MS,
    ...deps.tuning?.reflector,
  };
  const resolver = await createKubeResolver({
    api: transport,
    clock: deps.clock,
    random: deps.random,
    logger: deps.logger,
    maxWatches: config.maxWatches,
    serviceScope: config.capture === 'transparent' ? 'cluster' : 'namespace',
    homeNamespace: ns,
    ...(config.snapshot ? { snapshotPath: config.snapshot } : {}),
    transportStats: () => transport.stats,
    tokenExpiresAt: () => identity?.expiresAt(),
    sliceBatchMs: SLICE_BATCH_MS,
    ...deps.tuning,
    reflector,
  });
  const close = resolver.close.bind(resolver);
  const reflectors = reflectorsOf({ api: transport, ...deps, reflector });
  return Object.assign(resolver, {
    namespace: ns,
    reflectors,
    close: async (): Promise<void> => {
      await close();
      link.close();
    },
  });
}
