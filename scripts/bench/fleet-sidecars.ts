// One child process of the fleet simulator (scripts/bench/fleet.ts): runs many sidecar discovery
// stacks, each exactly as `outrigger proxy` wires it in-cluster (its own kubelet-style token
// directory with a TokenRequest token, its own transport and HTTP/2 connection, reflectors and
// resolver), and answers the parent's status questions over IPC. Not a test: CI never runs it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { createDiscovery, type Discovery, type DiscoveryDeps } from '../../src/discovery/index.ts';
import { systemClock, systemRandom } from '../../src/shared/clock.ts';
import { createLogger } from '../../src/shared/log.ts';
import { writeTokenDir } from '../../test/harness/token-dir.ts';

export interface SidecarSpec {
  ns: string;
  token: string;
  /** "namespace/name" of every Service this sidecar's app calls. */
  subs: string[];
}

export interface ChildStart {
  type: 'start';
  server: string;
  caPem: string;
  sidecars: SidecarSpec[];
  /** Spread of sidecar start times, like pods of a rollout. */
  rampMs: number;
  tuning: DiscoveryDeps['tuning'];
}

export interface SidecarSample {
  lists: number;
  watches: number;
  failures: number;
  openWatches: number;
  stale: number;
  found: number;
  subs: number;
  inSync: boolean;
}

export interface ChildSample {
  type: 'sample';
  rssBytes: number;
  baseRssBytes: number;
  cpuMicros: number;
  sidecars: SidecarSample[];
}

const running: { d: Discovery; subs: { namespace: string; name: string }[]; dir: string }[] = [];
let baseRss = 0;

async function startOne(msg: ChildStart, spec: SidecarSpec): Promise<void> {
  const dir = join(mkdtempSync(join(tmpdir(), 'fleet-sa-')), 'serviceaccount');
  writeTokenDir(dir, { token: spec.token, caPem: msg.caPem, namespace: spec.ns });
  const url = new URL(msg.server);
  const d = await createDiscovery(
    {
      source: { kind: 'kube' },
      kubeconfig: undefined,
      tokenDir: dir,
      namespace: undefined,
      capture: 'transparent',
      maxWatches: 500,
      snapshot: undefined,
    },
    {
      clock: systemClock,
      random: systemRandom,
      // Errors only, to stderr: a thousand sidecars' info lines would drown the table.
      logger: createLogger({ level: 'error' }),
      env: { KUBERNETES_SERVICE_HOST: url.hostname, KUBERNETES_SERVICE_PORT: url.port },
      ...(msg.tuning ? { tuning: msg.tuning } : {}),
    },
  );
  const subs = spec.subs.map((s) => {
    const [namespace = '', name = ''] = s.split('/');
    return { namespace, name };
  });
  running.push({ d, subs, dir });
  // The app's first calls: one lookup per Service it uses, spread over a few seconds.
  for (const k of subs) {
    void d.resolve(k, { waitMs: 0 });
    await delay(20 + Math.random() * 80);
  }
}

function sample(): ChildSample {
  const sidecars = running.map(({ d, subs }): SidecarSample => {
    const st = d.status();
    let found = 0;
    for (const k of subs) {
      const r = d.peek(k);
      if (r.kind === 'found' && r.source === 'api') found++;
    }
    const c = st.counters;
    return {
      lists: c?.apiLists ?? 0,
      watches: c?.apiWatches ?? 0,
      failures: c?.apiFailures ?? 0,
      openWatches: st.watches,
      stale: st.staleServices,
      found,
      subs: subs.length,
      inSync: st.staleServices === 0 && found === subs.length,
    };
  });
  const cpu = process.cpuUsage();
  return {
    type: 'sample',
    rssBytes: process.memoryUsage().rss,
    baseRssBytes: baseRss,
    cpuMicros: cpu.user + cpu.system,
    sidecars,
  };
}

process.on('message', (m: ChildStart | { type: 'sample' } | { type: 'stop' }) => {
  if (m.type === 'start') {
    baseRss = process.memoryUsage().rss;
    const gap = m.sidecars.length > 1 ? m.rampMs / m.sidecars.length : 0;
    void (async () => {
      for (const spec of m.sidecars) {
        void startOne(m, spec);
        await delay(gap);
      }
      process.send?.({ type: 'started' });
    })();
  } else if (m.type === 'sample') {
    process.send?.(sample());
  } else {
    void Promise.all(running.map((r) => r.d.close())).finally(() => {
      for (const r of running) rmSync(join(r.dir, '..'), { recursive: true, force: true });
      process.exit(0);
    });
  }
});
