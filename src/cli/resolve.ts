import { Command } from 'commander';
import { resolveOptions, type ResolveConfig } from '../config/person-options.ts';
import type { Endpoint, Resolution, ServiceInfo, ServicePort } from '../discovery/types.ts';
import { parseServiceName } from '../routing/authority.ts';
import { systemClock, systemRandom } from '../shared/clock.ts';
import { OutriggerError } from '../shared/errors.ts';
import { createLogger } from '../shared/log.ts';
import { defaultKubeconfig, requireReadableFile, wantsJson } from './common.ts';
import { personTable } from './option-table.ts';

type ResolveFlags = ResolveConfig;

/** NAME[:PORT] where PORT is a Service port number or name. */
export function parseTarget(
  arg: string,
  ns: string,
  domain: string,
): { key: { namespace: string; name: string }; port?: string } {
  const m = /^(.+?)(?::([A-Za-z0-9-]+))?$/.exec(arg.trim());
  const parsed = m?.[1] ? parseServiceName(m[1], ns, domain) : undefined;
  if (!parsed) {
    throw new OutriggerError(
      'config_invalid',
      `${JSON.stringify(arg)} is not a Service name: use svc, svc.ns, svc.ns.svc[.${domain}], optionally :PORT`,
    );
  }
  return m?.[2] ? { key: parsed.key, port: m[2] } : { key: parsed.key };
}

function pickPorts(service: ServiceInfo, port: string | undefined): ServicePort[] {
  if (port === undefined) return service.ports;
  const hit = service.ports.filter((p) => (/^\d+$/.test(port) ? p.port === Number(port) : p.name === port));
  if (hit.length === 0) {
    const have = service.ports.map((p) => (p.name ? `${p.name}(${p.port})` : String(p.port))).join(', ');
    throw new OutriggerError(
      'unknown_service',
      `Service ${service.key.namespace}/${service.key.name} has no port ${port}; ports: ${have || 'none'}`,
    );
  }
  return hit;
}

const ago = (ms: number): string => `${(Math.max(0, Date.now() - ms) / 1000).toFixed(1)}s ago`;

function text(res: Extract<Resolution, { kind: 'found' }>, ports: ServicePort[]): string {
  const s = res.service;
  const f = res.freshness;
  const fresh =
    f.state === 'fresh' ? `fresh (synced ${ago(f.syncedAt)})` : `STALE since ${ago(f.since)}: ${f.reason}`;
  const lines = [
    `${s.key.namespace}/${s.key.name}  ${s.type}${s.headless ? ' (headless)' : ''}  ${s.clusterIPs.join(',') || '-'}  ${fresh}  source=${res.source}`,
  ];
  if (s.externalName)
    lines.push(`  ExternalName -> ${s.externalName} (resolved by DNS, not proxied to endpoints)`);
  if (s.sessionAffinity === 'ClientIP')
    lines.push(`  session affinity: ClientIP, ${s.affinityTimeoutSeconds}s`);
  if (s.internalTrafficPolicy === 'Local')
    lines.push('  internalTrafficPolicy: Local (node-local endpoints only)');
  for (const p of ports) {
    const eps = s.endpoints.get(p.name) ?? [];
    lines.push(`  port ${p.name || '(unnamed)'} ${p.port}/${p.protocol}: ${eps.length} endpoint(s)`);
    for (const e of eps) lines.push(`    ${endpointText(e)}`);
  }
  return lines.join('\n');
}

function endpointText(e: Endpoint): string {
  const state = e.ready ? 'ready' : e.terminating ? 'terminating (fallback)' : 'not ready';
  const host = e.address.includes(':') ? `[${e.address}]` : e.address;
  const extra = [
    e.nodeName && `node=${e.nodeName}`,
    e.zone && `zone=${e.zone}`,
    e.podName && `pod=${e.podName}`,
    e.hostname && `hostname=${e.hostname}`,
  ];
  return [`${host}:${e.port}`, state, ...extra.filter(Boolean)].join('  ');
}

async function run(target: string, flags: ResolveFlags): Promise<void> {
  const waitMs = flags.wait;
  const source = flags.source ?? { kind: 'kube' as const };
  const kubeconfig = flags.kubeconfig ?? defaultKubeconfig();
  if (source.kind === 'kube' && !kubeconfig)
    throw new OutriggerError('config_invalid', 'no kubeconfig: pass --kubeconfig PATH or set KUBECONFIG');
  if (source.kind === 'file') requireReadableFile('--source', source.path);
  const json = wantsJson(flags);
  if (source.kind === 'kube' && kubeconfig) {
    // Name an unreachable or refusing API server at once instead of waiting for an empty answer.
    const { openKubeApi, apiVersion } = await import('./kube-api.ts');
    await apiVersion(await openKubeApi(kubeconfig));
  }
  // Discovery's own warnings (a failing list or watch) explain an answer that never came.
  let lastProblem = '';
  const logger = createLogger({
    level: 'warn',
    write: (line) => {
      const rec = JSON.parse(line) as { reason?: unknown; msg?: unknown };
      lastProblem = String(rec.reason ?? rec.msg);
    },
  });
  // Loaded on use (src/cli/index.ts): the sidecar builds this command but never runs it.
  const [{ createDiscovery }, { serviceInfoJson }] = await Promise.all([
    import('../discovery/index.ts'),
    import('../discovery/merge.ts'),
  ]);
  const discovery = await createDiscovery(
    {
      source,
      kubeconfig,
      tokenDir: '',
      namespace: flags.namespace,
      capture: 'explicit',
      maxWatches: 1,
      snapshot: undefined,
    },
    { clock: systemClock, random: systemRandom, logger, env: process.env },
  );
  // Discovery's timers do not hold a sidecar open; this one holds the CLI open while it waits.
  const keepAlive = setInterval(() => {}, 1_000);
  try {
    const { key, port } = parseTarget(target, discovery.namespace, flags.clusterDomain);
    const res = await discovery.resolve(key, { waitMs });
    if (res.kind !== 'found') {
      const why =
        res.kind === 'absent'
          ? 'does not exist'
          : `is unknown (${res.reason}${lastProblem ? `; ${lastProblem}` : ''})`;
      if (json)
        process.stdout.write(JSON.stringify({ service: `${key.namespace}/${key.name}`, ...res }) + '\n');
      throw new OutriggerError('unknown_service', `Service ${key.namespace}/${key.name} ${why}`);
    }
    const ports = pickPorts(res.service, port);
    if (json) {
      const endpoints = Object.fromEntries(
        ports.map((p) => [p.name, res.service.endpoints.get(p.name) ?? []]),
      );
      const out = {
        ...serviceInfoJson(res.service),
        endpoints,
        freshness: res.freshness,
        source: res.source,
      };
      process.stdout.write(JSON.stringify(out, null, 2) + '\n');
    } else {
      process.stdout.write(text(res, ports) + '\n');
    }
  } finally {
    clearInterval(keepAlive);
    await discovery.close();
  }
}

export function resolveCommand(): Command {
  const cmd = new Command('resolve')
    .description('print the endpoints the sidecar would route NAME[:PORT] to, using a kubeconfig')
    .argument(
      '<name[:port]>',
      'svc, svc.ns, svc.ns.svc or svc.ns.svc.cluster.local; PORT is a number or port name',
    );
  return personTable<keyof typeof resolveOptions, ResolveConfig>(cmd, resolveOptions, (flags, [target]) =>
    run(target ?? '', flags),
  );
}
