import { Command } from 'commander';
import { OutriggerError, errorMessage } from '../shared/errors.ts';

/**
 * `outrigger status [--admin URL]`: reads a running sidecar's admin API (/readyz and
 * /debug/discovery, which answer on loopback, so run it in the pod: kubectl exec) and prints its
 * discovery state: readiness, subscriptions, watches and each Service's freshness.
 */
interface ServiceLine {
  key: string;
  endpoints: number;
  source: string;
  freshness: { state: string; since?: number; syncedAt?: number; reason?: string };
}

interface DiscoveryView {
  ready: boolean;
  subscriptions: number;
  watches: number;
  staleServices: number;
  services: ServiceLine[];
}

async function getJson(base: string, path: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(new URL(path, base), { signal: AbortSignal.timeout(5_000) });
  const body: unknown = await res.json();
  return { status: res.status, body };
}

const age = (ms: number | undefined, now: number): string =>
  ms === undefined ? '-' : `${Math.max(0, (now - ms) / 1000).toFixed(0)}s ago`;

export function formatStatus(ready: boolean, d: DiscoveryView, now: number): string {
  const lines = [
    `ready: ${ready ? 'yes' : 'no'}   subscriptions: ${d.subscriptions}   watches: ${d.watches}   stale services: ${d.staleServices}`,
    '',
  ];
  const rows = [['SERVICE', 'ENDPOINTS', 'SOURCE', 'STATE', 'SINCE', 'REASON']];
  for (const s of [...d.services].sort((a, b) => a.key.localeCompare(b.key))) {
    const f = s.freshness;
    rows.push([
      s.key,
      String(s.endpoints),
      s.source,
      f.state,
      age(f.state === 'stale' ? f.since : f.syncedAt, now),
      f.reason ?? '',
    ]);
  }
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  for (const r of rows)
    lines.push(
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    );
  if (d.services.length === 0) lines.push('(no Services looked up yet)');
  return lines.join('\n');
}

/** The mesh identity line(s), from /debug/identity (absent when mTLS is off). */
export interface IdentityView {
  spiffeId: string;
  ready: boolean;
  source: string;
  notAfter?: string;
  renewAt?: string;
  renewalFailures: number;
  lastError?: string;
}

export function formatIdentity(v: IdentityView, now: number): string {
  const left = v.notAfter ? `${Math.round((Date.parse(v.notAfter) - now) / 1000)}s` : '-';
  const lines = [
    `identity: ${v.spiffeId}   valid: ${v.ready ? 'yes' : 'no'} (${v.source})   expires in: ${left}   renewal failures: ${v.renewalFailures}`,
  ];
  if (v.renewAt) lines.push(`  next renewal: ${v.renewAt}`);
  if (v.lastError) lines.push(`  last error: ${v.lastError}`);
  return lines.join('\n');
}

export function statusCommand(): Command {
  return new Command('status')
    .description("print a running sidecar's discovery state from its admin API")
    .option('--admin <url>', 'admin API base URL (loopback: run inside the pod)', 'http://127.0.0.1:7402')
    .option('--json', 'print the raw /debug/discovery JSON')
    .action(async (flags: { admin: string; json?: boolean }) => {
      let ready: { status: number; body: unknown };
      let discovery: { status: number; body: unknown };
      let identity: { status: number; body: unknown };
      try {
        ready = await getJson(flags.admin, '/readyz');
        discovery = await getJson(flags.admin, '/debug/discovery');
        identity = await getJson(flags.admin, '/debug/identity');
      } catch (e) {
        throw new OutriggerError(
          'kube_unavailable',
          `cannot read the admin API at ${flags.admin}: ${errorMessage(e)}`,
        );
      }
      if (discovery.status !== 200)
        throw new OutriggerError(
          'kube_forbidden',
          `${flags.admin}/debug/discovery answered ${discovery.status} (it answers on loopback only)`,
        );
      if (flags.json) {
        process.stdout.write(JSON.stringify(discovery.body, null, 2) + '\n');
        return;
      }
      if (identity.status === 200)
        process.stdout.write(formatIdentity(identity.body as IdentityView, Date.now()) + '\n\n');
      process.stdout.write(
        formatStatus(ready.status === 200, discovery.body as DiscoveryView, Date.now()) + '\n',
      );
    });
}
