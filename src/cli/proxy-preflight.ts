import { loadConfig } from '../config/load.ts';
import { options, type OptionName } from '../config/options.ts';
import { defaultKubeconfig, requireReadableFile } from './common.ts';
import type { TableFlags } from './option-table.ts';

type Flags = TableFlags<OptionName>;

/**
 * What `outrigger proxy` checks before it starts anything: the whole configuration (a bad value
 * exits 2 before a port is bound), a --source file that must exist at start-up (later it may
 * change or vanish: the last good read is kept), and, outside a cluster, kubectl's $KUBECONFIG.
 * Returns the flags to run with.
 */
export function proxyPreflight(flags: Flags, env: Record<string, string | undefined>): Flags {
  const config = loadConfig({ ...flags, env });
  if (config.source.kind === 'file') requireReadableFile('--source', config.source.path);
  const outOfCluster = !env.KUBERNETES_SERVICE_HOST;
  if (config.source.kind === 'kube' && config.kubeconfig === undefined && outOfCluster && env.KUBECONFIG) {
    const kubeconfig = defaultKubeconfig({ KUBECONFIG: env.KUBECONFIG });
    if (kubeconfig) return { ...flags, flags: { ...flags.flags, kubeconfig } };
  }
  return flags;
}

const LISTENERS = ['egressPort', 'ingressPort', 'adminPort'] as const;

/**
 * A port another process holds is found only when the sidecar binds it; the system's
 * "EADDRINUSE :::7402" names neither the flag nor what to do, so say both.
 */
export function explainStartError(
  e: unknown,
  flags: Flags,
  env: Record<string, string | undefined>,
): unknown {
  const err = e as NodeJS.ErrnoException & { port?: number };
  if (err.code !== 'EADDRINUSE' || err.port === undefined) return e;
  const config = loadConfig({ ...flags, env });
  const name = LISTENERS.find((n) => config[n] === err.port);
  if (!name) return e;
  const spec = options[name];
  return new Error(
    `${spec.flag.split(' ')[0]} ${err.port} (${spec.env}): the port is already in use by another process; stop it or choose another port`,
    { cause: e },
  );
}
