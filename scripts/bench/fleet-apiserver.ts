// What the fleet costs the API server, read from its own /metrics and /proc, and how a plain
// `kubectl get` fares meanwhile. Used by scripts/bench/fleet.ts.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { TestCluster } from '../../test/harness/cluster.ts';

export interface ApiSample {
  at: number;
  /** apiserver_request_total summed by verb (LIST, WATCH, GET, POST, PATCH, ...). */
  byVerb: Record<string, number>;
  /** apiserver_request_total with code 429. */
  throttled: number;
  /**
   * Of those, the ones priority and fairness refused (apiserver_flowcontrol_rejected_requests_total);
   * the rest come from the max-in-flight limits or a watch cache still initializing.
   */
  apfRejected: number;
  /** apiserver_longrunning_requests{verb="WATCH"}: watches open now. */
  openWatches: number;
  /** apiserver_registered_watchers summed over kinds. */
  registeredWatchers: number;
  rssBytes: number;
  /** User + system CPU of the kube-apiserver process, in clock ticks (1/100 s). */
  cpuTicks: number;
}

const label = (labels: string, name: string): string =>
  new RegExp(`${name}="([^"]*)"`).exec(labels)?.[1] ?? '';

export function parseMetrics(text: string): Omit<ApiSample, 'at' | 'rssBytes' | 'cpuTicks'> {
  const byVerb: Record<string, number> = {};
  let throttled = 0;
  let apfRejected = 0;
  let openWatches = 0;
  let registeredWatchers = 0;
  for (const line of text.split('\n')) {
    const m = /^(\w+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const [, name, labels = '', raw] = m;
    const v = Number(raw);
    if (name === 'apiserver_request_total') {
      const verb = label(labels, 'verb');
      byVerb[verb] = (byVerb[verb] ?? 0) + v;
      if (label(labels, 'code') === '429') throttled += v;
    } else if (name === 'apiserver_longrunning_requests' && label(labels, 'verb') === 'WATCH') {
      openWatches += v;
    } else if (name === 'apiserver_registered_watchers') {
      registeredWatchers += v;
    } else if (name === 'apiserver_flowcontrol_rejected_requests_total') {
      apfRejected += v;
    }
  }
  return { byVerb, throttled, apfRejected, openWatches, registeredWatchers };
}

function procOf(pid: number): { rssBytes: number; cpuTicks: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the ")" of the command name: utime is the 14th field overall, stime the 15th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return {
      rssBytes: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024,
      cpuTicks: Number(fields[11]) + Number(fields[12]),
    };
  } catch {
    return { rssBytes: 0, cpuTicks: 0 };
  }
}

export function apiserverPid(cluster: TestCluster): number {
  try {
    return Number(readFileSync(path.join(cluster.stateDir, 'apiserver.pid'), 'utf8').trim());
  } catch {
    return 0;
  }
}

export async function sampleApi(cluster: TestCluster): Promise<ApiSample | undefined> {
  try {
    const text = await cluster.admin.request<string>('GET', '/metrics');
    return { at: Date.now(), ...parseMetrics(String(text)), ...procOf(apiserverPid(cluster)) };
  } catch {
    return undefined;
  }
}

/** Requests by verb between two samples (counters reset when the API server restarts). */
export function verbDelta(a: ApiSample | undefined, b: ApiSample): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [verb, v] of Object.entries(b.byVerb)) {
    const before = a?.byVerb[verb] ?? 0;
    out[verb] = v >= before ? v - before : v;
  }
  return out;
}

export const sum = (r: Record<string, number>): number => Object.values(r).reduce((x, y) => x + y, 0);

/**
 * Runs `kubectl get services` in a loop until stopped, recording each wall time: what an operator
 * feels while the fleet loads the API server. Bounded by the caller's stop().
 */
export function kubectlProbe(kubectl: string, kubeconfig: string, ns: string): { stop(): Promise<number[]> } {
  const times: number[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const start = performance.now();
      const ok = await new Promise<boolean>((resolve) =>
        execFile(
          kubectl,
          ['--kubeconfig', kubeconfig, 'get', 'services', '-n', ns, '-o', 'name', '--request-timeout=30s'],
          { timeout: 35_000 },
          (err) => resolve(!err),
        ),
      );
      times.push(ok ? performance.now() - start : Number.POSITIVE_INFINITY);
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return times;
    },
  };
}

export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}
