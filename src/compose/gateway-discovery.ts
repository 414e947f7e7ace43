/**
 * What `outrigger gateway` reads, on one API connection: the Ingress store (Ingresses,
 * IngressClasses, TLS Secrets) and the sidecar's Service resolver, with their snapshots, and the
 * optional status publisher. Every backend of a new table is subscribed at once, so the first
 * request does not wait for discovery and the snapshot holds every Service a route needs.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { GATEWAY_POD_LABELS, type GatewayConfig } from '../config/gateway-options.ts';
import type { KubeApi } from '../kube/api.ts';
import { createKubeResolver, type KubeResolver, type KubeResolverOptions } from '../discovery/resolver.ts';
import type { Ingress, TlsSecret } from '../gateway/objects.ts';
import { usableCertificate } from '../gateway/certs.ts';
import { GatewayServices, type GatewayServicesOptions } from '../gateway/gateway-services.ts';
import { RouteStatusWriter } from '../gateway/route-status.ts';
import { StatusPublisher } from '../gateway/status.ts';
import { createGatewayStore, type GatewayStore, type GatewayStoreOptions } from '../gateway/store.ts';
import type { RouteTable } from '../gateway/table.ts';
import type { GatewayRouteTable } from '../routes/table.ts';
import type { Clock, Random } from '../shared/clock.ts';
import { OutriggerError } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';

/**
 * A gateway runs as a couple of replicas, not one per pod: its watches can retry far sooner than a
 * fleet of sidecars may (client-go's 800 ms to 30 s), so a change made when the API server comes
 * back is applied within about a second, and a stalled list is given up after 10 s.
 */
const GATEWAY_REFLECTOR = { backoff: { initialMs: 200, maxMs: 2_000, factor: 2 }, listTimeoutMs: 10_000 };

export interface GatewayDiscoveryDeps {
  api: KubeApi;
  clock: Clock;
  random: Random;
  log: Logger;
  /** Tuning for tests (backoff, timeouts, debounce); production uses the defaults. */
  tuning?: {
    reflector?: GatewayStoreOptions['reflector'];
    snapshotDebounceMs?: number;
  } & Pick<KubeResolverOptions, 'transportStats' | 'tokenExpiresAt'>;
}

export interface GatewayDiscovery {
  store: GatewayStore;
  resolver: KubeResolver;
  /** The Gateways' own Services (--gateway-services), when on. */
  services: GatewayServices | undefined;
  close(): Promise<void>;
}

export async function openGatewayDiscovery(
  config: GatewayConfig,
  deps: GatewayDiscoveryDeps,
  onTable: (table: RouteTable, secrets: ReadonlyMap<string, TlsSecret>, routes: GatewayRouteTable) => void,
): Promise<GatewayDiscovery> {
  const { api, clock, random, log, tuning } = deps;
  // Private to the gateway's user: it holds TLS private keys.
  if (config.snapshotDir) await mkdir(config.snapshotDir, { recursive: true, mode: 0o700 });
  const snapshot = (file: string) =>
    config.snapshotDir ? { snapshotPath: join(config.snapshotDir, file) } : {};
  const common = {
    api,
    clock,
    random,
    logger: log,
    reflector: tuning?.reflector ?? GATEWAY_REFLECTOR,
    ...(tuning?.snapshotDebounceMs !== undefined ? { snapshotDebounceMs: tuning.snapshotDebounceMs } : {}),
  };
  const resolver = await createKubeResolver({
    ...common,
    ...snapshot('services.snap'),
    maxWatches: config.maxWatches,
    serviceScope: config.watchNamespace ? 'namespace' : 'cluster',
    ...(config.watchNamespace ? { homeNamespace: config.watchNamespace } : {}),
    ...(tuning?.transportStats ? { transportStats: tuning.transportStats } : {}),
    ...(tuning?.tokenExpiresAt ? { tokenExpiresAt: tuning.tokenExpiresAt } : {}),
  });
  const status = statusPublisher(config, api, clock, log, () => store.served());
  const services = gatewayServices(config, api, {
    clock,
    log,
    table: () => store.routeTable(),
    stale: () => store.stale(),
    onAddress: () => routeStatus?.schedule(),
  });
  const routeStatus = config.gatewayApi
    ? new RouteStatusWriter({
        api: { mergePatch: writer(api, '--gateway-api') },
        controller: config.controller,
        table: () => store.routeTable(),
        statusOf: (kind, meta) => store.routeStatusOf(kind, meta),
        stale: () => store.stale(),
        secretUsable: (key) => {
          const secret = store.secret(key);
          return secret !== undefined && usableCertificate(secret);
        },
        serviceAbsent: async (namespace, name) =>
          (await resolver.resolve({ namespace, name }, { waitMs: 0 })).kind === 'absent',
        addresses: config.publishStatusAddress,
        ...(services ? { addressOf: (gateway: string) => services.addressOf(gateway) } : {}),
        clock,
        logger: log.child({ component: 'gateway-api-status' }),
      })
    : undefined;
  const store = await createGatewayStore({
    ...common,
    ...snapshot('gateway.snap'),
    classPolicy: { controller: config.controller, watchWithoutClass: config.watchWithoutClass },
    ...(config.watchNamespace ? { namespace: config.watchNamespace } : {}),
    ...(config.defaultCertificate ? { defaultCertificate: config.defaultCertificate } : {}),
    gatewayApi: config.gatewayApi,
    onTable: (table, secrets, routes) => {
      status?.schedule();
      services?.schedule();
      routeStatus?.schedule();
      onTable(table, secrets, routes);
      for (const key of [...table.services(), ...routes.services()]) {
        const [namespace = '', name = ''] = key.split('/');
        void resolver.resolve({ namespace, name }, { waitMs: 0 });
      }
    },
  });
  return {
    store,
    resolver,
    services,
    close: async () => {
      status?.close();
      services?.close();
      routeStatus?.close();
      await Promise.allSettled([store.close(), resolver.close()]);
    },
  };
}

function writer(api: KubeApi, flag: string): NonNullable<KubeApi['mergePatch']> {
  const mergePatch = api.mergePatch?.bind(api);
  if (!mergePatch)
    throw new OutriggerError('config_invalid', `${flag} needs an API connection that can write`);
  return mergePatch;
}

/**
 * --gateway-services (with --gateway-api): the Gateways' own Services, in the gateway's namespace;
 * undefined when off, or when the gateway does not know its namespace (it then serves every
 * Gateway on its shared ports, as before, and says so).
 */
function gatewayServices(
  config: GatewayConfig,
  api: KubeApi,
  o: Pick<GatewayServicesOptions, 'table' | 'stale' | 'onAddress' | 'clock'> & { log: Logger },
): GatewayServices | undefined {
  if (!config.gatewayApi || !config.gatewayServices) return undefined;
  const logger = o.log.child({ component: 'gateway-services' });
  if (!config.podNamespace) {
    logger.warn('no address per Gateway: --pod-namespace (OUTRIGGER_POD_NAMESPACE) is not set');
    return undefined;
  }
  const apply = api.apply?.bind(api);
  if (!apply)
    throw new OutriggerError('config_invalid', '--gateway-services needs an API connection that can write');
  return new GatewayServices({
    ...o,
    api: { apply },
    namespace: config.podNamespace,
    selector: GATEWAY_POD_LABELS,
    logger,
  });
}

/** --publish-status-address: the publisher, or undefined when the flag is empty. */
function statusPublisher(
  config: GatewayConfig,
  api: KubeApi,
  clock: Clock,
  log: Logger,
  served: () => Ingress[],
): StatusPublisher | undefined {
  if (config.publishStatusAddress.length === 0) return undefined;
  return new StatusPublisher({
    api: { mergePatch: writer(api, '--publish-status-address') },
    addresses: config.publishStatusAddress,
    served,
    clock,
    logger: log.child({ component: 'gateway-status' }),
  });
}
