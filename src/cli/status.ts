import { Command } from 'commander';
import { OutriggerError } from '../shared/errors.ts';
import { statusOptions, type StatusConfig } from '../config/person-options.ts';
import { adminBase, adminGet } from './admin-url.ts';
import { defaultKubeconfig, formatTable, wantsJson } from './common.ts';
import { personTable } from './option-table.ts';

/**
 * `outrigger status [--admin URL]`: reads a running sidecar's admin API (/readyz and
 * /debug/discovery, which answer on loopback, so run it in the pod: kubectl exec) and prints its
 * discovery state: readiness, subscriptions, watches and each Service's freshness. Exits 1 when
 * the sidecar is not ready, so scripts can wait on it.
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
  counters?: { apiFailures?: number };
}

interface ReadyView {
  ready?: boolean;
  detail?: { draining?: boolean; discovery?: { ready?: boolean }; meshCertificate?: boolean };
}

/**
 * Why /readyz says no, in words a user can act on: every condition its detail reports false,
 * so a sidecar held back by its certificate is not blamed on discovery.
 */
export function notReadyReasons(ready: ReadyView, d: DiscoveryView, identity?: IdentityView): string[] {
  const detail = ready.detail ?? {};
  const reasons: string[] = [];
  if (detail.draining) reasons.push('the sidecar is draining (shutting down)');
  if (detail.meshCertificate === false)
    reasons.push(
      `no valid mesh certificate (strict mTLS needs one): ${identity?.lastError ?? 'the identity issuer has not answered yet'}`,
    );
  if ((detail.discovery?.ready ?? d.ready) === false) reasons.push(discoveryReason(d));
  // A sidecar newer than this client may report a condition it does not know: show the detail.
  if (reasons.length === 0) reasons.push(`/readyz detail: ${JSON.stringify(detail)}`);
  return reasons;
}

function discoveryReason(d: DiscoveryView): string {
  const failures = d.counters?.apiFailures ?? 0;
  if (failures > 0)
    return `discovery has not synced: ${failures} API request(s) failed so far; the sidecar's log names the error (kubectl logs POD -c outrigger-proxy)`;
  return 'discovery has not synced yet (no answer from its source so far)';
}

const age = (ms: number | undefined, now: number): string =>
  ms === undefined ? '-' : `${Math.max(0, (now - ms) / 1000).toFixed(0)}s ago`;

export function formatStatus(ready: boolean, d: DiscoveryView, now: number, why: string[] = []): string {
  const lines = [
    `ready: ${ready ? 'yes' : 'no'}   subscriptions: ${d.subscriptions}   watches: ${d.watches}   stale services: ${d.staleServices}`,
    ...(ready ? [] : why.map((w) => `not ready: ${w}`)),
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
  lines.push(...formatTable(rows));
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

type StatusFlags = StatusConfig;

export function statusCommand(): Command {
  const cmd = new Command('status').description(
    "print a running sidecar's discovery state from its admin API, or with -n/-A every injected pod's sidecar through the API server; exit 1 when one is not ready",
  );
  return personTable<keyof typeof statusOptions, StatusConfig>(cmd, statusOptions, async (flags) => {
    if (flags.namespace !== undefined || flags.allNamespaces) return fleetStatus(flags);
    const base = adminBase(flags.admin);
    const ready = await adminGet(base, '/readyz', 'json');
    const discovery = await adminGet(base, '/debug/discovery', 'json');
    // Absent (404) when the sidecar runs without mutual TLS.
    const identity = await adminGet(base, '/debug/identity', 'json');
    if (discovery.status !== 200)
      throw new OutriggerError(
        'kube_forbidden',
        `${base.origin}/debug/discovery answered ${discovery.status} (it answers on loopback only: kubectl exec into the pod, or kubectl port-forward)`,
      );
    const isReady = ready.status === 200;
    if (!isReady) process.exitCode = 1;
    if (wantsJson(flags)) {
      process.stdout.write(JSON.stringify(discovery.body, null, 2) + '\n');
      return;
    }
    const id = identity.status === 200 ? (identity.body as IdentityView) : undefined;
    if (id) process.stdout.write(formatIdentity(id, Date.now()) + '\n\n');
    const d = discovery.body as DiscoveryView;
    const why = isReady ? [] : notReadyReasons(ready.body as ReadyView, d, id);
    process.stdout.write(formatStatus(isReady, d, Date.now(), why) + '\n');
  });
}

async function fleetStatus(flags: StatusFlags): Promise<void> {
  const kubeconfig = flags.kubeconfig ?? defaultKubeconfig();
  if (!kubeconfig)
    throw new OutriggerError('config_invalid', 'no kubeconfig: pass --kubeconfig PATH or set KUBECONFIG');
  // Loaded on use: the single-sidecar status needs no API client.
  const [{ openKubeApi }, { readFleet, formatFleet }] = await Promise.all([
    import('./kube-api.ts'),
    import('./fleet.ts'),
  ]);
  const fleet = await readFleet(
    await openKubeApi(kubeconfig),
    flags.allNamespaces ? undefined : flags.namespace,
  );
  if (fleet.sidecars.some((s) => s.ready !== 'yes')) process.exitCode = 1;
  process.stdout.write((wantsJson(flags) ? JSON.stringify(fleet, null, 2) : formatFleet(fleet)) + '\n');
}
