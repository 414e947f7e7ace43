import { Command } from 'commander';
import { OutriggerError } from '../shared/errors.ts';
import { outriggerVersion } from '../shared/version.ts';
import { ADMIN_HELP, adminBase, adminGet } from './admin-url.ts';
import { addOutputOptions, wantsJson } from './common.ts';

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

export function versionCommand(): Command {
  const cmd = new Command('version')
    .description("print this client's version, and a running sidecar's with --admin")
    .option('--admin <url>', `${ADMIN_HELP}; e.g. 127.0.0.1:7402`);
  return addOutputOptions(cmd).action(async (flags: { admin?: string; json?: boolean; output?: string }) => {
    const client = { version: outriggerVersion, node: process.version };
    let sidecar: { version: string; node: string } | undefined;
    if (flags.admin !== undefined) {
      const base = adminBase(flags.admin);
      const res = await adminGet(base, '/metrics', 'text');
      sidecar = res.status === 200 ? sidecarVersion(String(res.body)) : undefined;
      if (!sidecar)
        throw new OutriggerError(
          'kube_bad_response',
          `${base.origin}/metrics (status ${res.status}) has no outrigger_build_info: not an Outrigger sidecar's admin port, or a sidecar that predates the build-info metric`,
        );
    }
    if (wantsJson(flags)) {
      process.stdout.write(JSON.stringify({ client, ...(sidecar ? { sidecar } : {}) }, null, 2) + '\n');
      return;
    }
    process.stdout.write(`client:  outrigger ${client.version} (Node.js ${client.node})\n`);
    if (sidecar) process.stdout.write(`sidecar: outrigger ${sidecar.version} (Node.js ${sidecar.node})\n`);
  });
}
