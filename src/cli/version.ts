import { Command } from 'commander';
import { OutriggerError } from '../shared/errors.ts';
import { outriggerVersion } from '../shared/app-root.ts';
import { versionOptions, type VersionConfig } from '../config/person-options.ts';
import { adminBase, adminGet } from './admin-url.ts';
import { defaultKubeconfig, wantsJson } from './common.ts';
import { personTable } from './option-table.ts';

/**
 * `outrigger version [--admin URL]`: this client's version and, given a sidecar's admin URL, the
 * sidecar's, read from its outrigger_build_info metric (/metrics answers off loopback too, so a
 * port-forward is enough).
 */
export function sidecarVersion(metrics: string): { version: string; node: string } | undefined {
  const m = /^outrigger_build_info\{([^}]*)\}\s+1\s*$/m.exec(metrics);
  if (!m?.[1]) return undefined;
  const label = (name: string): string => new RegExp(`${name}="([^"]*)"`).exec(m[1] ?? '')?.[1] ?? 'unknown';
  return { version: label('version'), node: label('node') };
}

interface Versions {
  client: { version: string; node: string };
  sidecar?: { version: string; node: string };
  /** The cluster's side, as `kubectl version` shows it: the API server and the control plane. */
  server?: { kubernetes: string; controlPlane: string | null };
}

export function versionCommand(): Command {
  const cmd = new Command('version').description(
    "print this client's version, the cluster's (API server and Outrigger's control plane) when a kubeconfig is found, and a running sidecar's with --admin",
  );
  return personTable<keyof typeof versionOptions, VersionConfig>(cmd, versionOptions, async (flags) => {
    const v: Versions = { client: { version: outriggerVersion, node: process.version } };
    if (flags.admin !== undefined) v.sidecar = await readSidecarVersion(adminBase(flags.admin));
    const json = wantsJson(flags);
    // The local lines first, so that an unreachable cluster still shows them.
    if (!json) {
      process.stdout.write(`client:  outrigger ${v.client.version} (Node.js ${v.client.node})\n`);
      if (v.sidecar)
        process.stdout.write(`sidecar: outrigger ${v.sidecar.version} (Node.js ${v.sidecar.node})\n`);
    }
    const kubeconfig = flags.client ? undefined : (flags.kubeconfig ?? defaultKubeconfig());
    if (kubeconfig !== undefined) {
      v.server = await readServerVersion(kubeconfig);
      const cp = v.server.controlPlane;
      if (!json)
        process.stdout.write(
          `server:  Kubernetes ${v.server.kubernetes}; control plane ${cp === null ? 'not installed (no outrigger-system/outrigger-webhook)' : `outrigger ${cp}`}\n`,
        );
    }
    if (json) process.stdout.write(JSON.stringify(v, null, 2) + '\n');
  });
}

async function readSidecarVersion(base: URL): Promise<{ version: string; node: string }> {
  const res = await adminGet(base, '/metrics', 'text');
  const sidecar = res.status === 200 ? sidecarVersion(String(res.body)) : undefined;
  if (!sidecar)
    throw new OutriggerError(
      'kube_bad_response',
      `${base.origin}/metrics (status ${res.status}) has no outrigger_build_info: not an Outrigger sidecar's admin port, or a sidecar that predates the build-info metric`,
    );
  return sidecar;
}

async function readServerVersion(
  kubeconfig: string,
): Promise<{ kubernetes: string; controlPlane: string | null }> {
  // Loaded on use: `version --client` and the image's smoke test need no API client.
  const [{ apiVersion, openKubeApi }, { webhookVersion }] = await Promise.all([
    import('./kube-api.ts'),
    import('./fleet.ts'),
  ]);
  const api = await openKubeApi(kubeconfig);
  return { kubernetes: await apiVersion(api), controlPlane: (await webhookVersion(api)) ?? null };
}
