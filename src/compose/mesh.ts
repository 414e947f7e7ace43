/**
 * The sidecar's mesh, when outrigger.dev/mtls asks for it: its identity (the X.509 code is loaded
 * only then), the wiring of mutual TLS into the data path, /debug/identity, the identity metrics,
 * and kubelet's rewritten app probes on the admin port.
 */
import { appHealth } from '../admin/app-health.ts';
import type { GatewayConfig } from '../config/gateway-options.ts';
import type { Config } from '../config/options.ts';
import type { ClientMesh } from '../mesh/client-mesh.ts';
import type { SidecarIdentity } from '../mesh/sidecar-identity.ts';
import type { Clock } from '../shared/clock.ts';
import { systemRandom } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import type { DataPathDeps } from './data-path.ts';

export async function openMesh(
  config: Config,
  deps: { clock: Clock; log: Logger; env: Record<string, string | undefined> },
): Promise<SidecarIdentity | undefined> {
  if (config.mtls === 'off') return undefined;
  const { startSidecarIdentity } = await import('../mesh/sidecar-identity.ts');
  return startSidecarIdentity(
    { ...config, mtls: config.mtls as 'permissive' | 'strict' },
    {
      clock: deps.clock,
      random: systemRandom,
      log: deps.log,
      // As the ingress does under transparent capture: the app at the pod's own address.
      appHost: (config.capture === 'transparent' && deps.env.OUTRIGGER_POD_IP) || '127.0.0.1',
    },
  );
}

/**
 * The gateway's mesh (--mtls on): a client only. It dials meshed endpoints with its own identity
 * and listens on no mesh port, so its settings are a strict listener's with nobody allowed in;
 * strict also keeps it unready until it holds a certificate.
 */
export async function openGatewayMesh(
  config: GatewayConfig,
  deps: { clock: Clock; log: Logger },
): Promise<ClientMesh | undefined> {
  if (config.mtls === 'off') return undefined;
  const [{ startSidecarIdentity }, { ClientMesh }] = await Promise.all([
    import('../mesh/sidecar-identity.ts'),
    import('../mesh/client-mesh.ts'),
  ]);
  const log = deps.log.child({ component: 'mesh' });
  return new ClientMesh({
    start: () =>
      startSidecarIdentity(
        { ...config, mtls: 'strict', allowFrom: [] },
        { clock: deps.clock, random: systemRandom, log, appHost: '127.0.0.1' },
      ),
    clock: deps.clock,
    log,
  });
}

/** The data path's side of the mesh (nothing when mTLS is off). */
export function meshDeps(
  mesh: SidecarIdentity | undefined,
  config: Config,
  env: Record<string, string | undefined>,
): Pick<DataPathDeps, 'mesh' | 'debugExtra' | 'appHealth'> {
  return {
    ...(mesh ? { mesh: mesh.wiring, debugExtra: { identity: () => mesh.view() } } : {}),
    // Where kubelet would have sent them: the pod's IP (an app may listen there only).
    ...(Object.keys(config.appProbes).length > 0
      ? { appHealth: appHealth(config.appProbes, env.OUTRIGGER_POD_IP ?? '127.0.0.1') }
      : {}),
  };
}
