import type { Config } from '../config/options.ts';
import type { Clock, Random } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import { issuerClient } from './issuer-client.ts';
import { MeshTls } from './mesh-tls.ts';
import { meshWiring, type MeshWiring } from './wiring.ts';
import { TrustBundle } from './trust-bundle.ts';
import { WorkloadIdentity } from './workload-identity.ts';

export type SidecarIdentityConfig = Pick<
  Config,
  | 'trustDomain'
  | 'identityIssuer'
  | 'identityTokenFile'
  | 'identityDir'
  | 'trustBundleFile'
  | 'meshPort'
  | 'allowFrom'
  | 'connectTimeoutMs'
> & { mtls: 'permissive' | 'strict' };

export interface SidecarIdentity {
  identity: WorkloadIdentity;
  bundle: TrustBundle;
  /** The data path's side: mutual TLS out, the mesh listener in. */
  wiring: MeshWiring;
  /** For /debug/identity and `outrigger status`. */
  view(): unknown;
  close(): void;
}

/**
 * The sidecar's mesh identity as `outrigger proxy` runs it: the trust bundle first (without roots
 * neither the issuer nor any peer can be verified), then the identity, whose first request may
 * fail (issuer down) without stopping the sidecar: it keeps asking, and plaintext still flows.
 */
export async function startSidecarIdentity(
  config: SidecarIdentityConfig,
  deps: { clock: Clock; random: Random; log: Logger; appHost: string },
): Promise<SidecarIdentity> {
  const bundle = new TrustBundle({ file: config.trustBundleFile, clock: deps.clock, log: deps.log });
  await bundle.start();
  const identity = new WorkloadIdentity({
    trustDomain: config.trustDomain,
    tokenFile: config.identityTokenFile,
    storeDir: config.identityDir,
    request: issuerClient({ url: new URL(config.identityIssuer), trustBundle: () => bundle.pem() }),
    clock: deps.clock,
    random: deps.random,
    log: deps.log,
  });
  try {
    await identity.start();
  } catch (e) {
    bundle.close();
    throw e;
  }
  const wiring = meshWiring({
    tls: new MeshTls({ identity, bundle }, config.trustDomain),
    meshPort: config.meshPort,
    appHost: deps.appHost,
    allowFrom: () => config.allowFrom,
    mode: config.mtls,
    connectTimeoutMs: config.connectTimeoutMs,
    clock: deps.clock,
    log: deps.log,
  });
  return {
    identity,
    bundle,
    wiring,
    view: () => ({ ...identity.status(), trustBundleReloads: bundle.reloads }),
    close: () => {
      identity.close();
      bundle.close();
    },
  };
}
