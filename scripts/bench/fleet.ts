// Fleet simulator: what N sidecars' discovery costs one kube-apiserver, and what an API server
// restart does. Real parts only: a kube-apiserver + etcd from scripts/test-cluster (its own state
// directory), RBAC on, one TokenRequest token per sidecar, and in a few child processes the real
// identity/transport/reflector/resolver code (scripts/bench/fleet-sidecars.ts). The workload:
// Services with selectors and three Pods each, whose status the harness writes as a kubelet would,
// and the EndpointSlice controller of kube-controller-manager writing the slices (--churn
// controller, the default); rolling updates replace the Pods one at a time (new Pod Ready, old
// Pod terminating, then gone). --churn slices writes the slices directly instead.
//
//   node scripts/bench/fleet.ts --sidecars 100 [--procs 4] [--apf] [--json out.json] [--label before]
//
// --apf runs the API server with priority and fairness on (as real clusters do); the `kubectl get`
// probe then runs as an operator without system:masters, so it is classified as a user's request
// (global-default), not exempt.
//
// Phases: start (every sidecar subscribed and in sync), idle (per-sidecar requests, extrapolated
// to an hour; --time-scale shortens watch timeouts so a short window covers many of them), churn
// (rolling updates), outage (apiserver-stop, --outage-s, apiserver-start: the reconnect wave).
// A benchmark, not a test: CI never runs it.
import { fork, type ChildProcess, execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startCluster, type TestCluster } from '../../test/harness/cluster.ts';
import type { KubeAdmin } from '../../test/harness/kube.ts';
import {
  createPod,
  ensureNode,
  podName,
  setPodStatus,
  startPod,
  stopPod,
} from '../../test/harness/kubelet.ts';
import { repoRoot } from '../../test/harness/tools.ts';
import { kubectlProbe, percentile, sampleApi, sum, verbDelta, type ApiSample } from './fleet-apiserver.ts';
import type { ChildSample, ChildStart, SidecarSample, SidecarSpec } from './fleet-sidecars.ts';

const { values: flags } = parseArgs({
  options: {
    sidecars: { type: 'string', default: '100' },
    procs: { type: 'string', default: '4' },
    namespaces: { type: 'string', default: '20' },
    services: { type: 'string', default: '500' },
    'min-subs': { type: 'string', default: '5' },
    'max-subs': { type: 'string', default: '30' },
    'ramp-s': { type: 'string', default: '20' },
    'idle-s': { type: 'string', default: '60' },
    'time-scale': { type: 'string', default: '20' },
    /** The product's watch timeout range, which --time-scale divides. */
    'watch-timeout-s': { type: 'string', default: '300,600' },
    'churn-s': { type: 'string', default: '30' },
    'churn-rate': { type: 'string', default: '4' },
    'outage-s': { type: 'string', default: '20' },
    'limit-s': { type: 'string', default: '180' },
    seed: { type: 'string', default: '1' },
    churn: { type: 'string', default: 'controller' },
    apf: { type: 'boolean', default: false },
    label: { type: 'string', default: '' },
    json: { type: 'string' },
  },
});

/** A number flag within bounds, or a clear error naming it. */
function num(name: keyof typeof flags, min: number, max: number): number {
  const v = Number(flags[name]);
  if (!Number.isFinite(v) || v < min || v > max)
    throw new Error(`--${name} ${String(flags[name])}: expected a number in [${min}, ${max}]`);
  return v;
}

const N = num('sidecars', 1, 2000);
const PROCS = Math.min(N, num('procs', 1, 32));
const NAMESPACES = num('namespaces', 1, 200);
const SERVICES = num('services', NAMESPACES, 5000);
const MIN_SUBS = num('min-subs', 1, 200);
const MAX_SUBS = Math.max(MIN_SUBS, num('max-subs', 1, 500));
const TIME_SCALE = num('time-scale', 1, 120);
const LIMIT_MS = num('limit-s', 10, 1800) * 1000;
const WATCH_TIMEOUT_S = (flags['watch-timeout-s'] ?? '').split(',').map(Number);
if (WATCH_TIMEOUT_S.length !== 2 || !WATCH_TIMEOUT_S.every((x) => x >= 1 && x <= 86_400))
  throw new Error(`--watch-timeout-s ${flags['watch-timeout-s']}: expected MIN,MAX seconds, e.g. 300,600`);
const CHURN = flags.churn;
if (CHURN !== 'controller' && CHURN !== 'slices')
  throw new Error(`--churn ${CHURN}: expected controller (the EndpointSlice controller) or slices`);
const say = (s: string): boolean =>
  process.stderr.write(`fleet ${new Date().toISOString().slice(11, 19)} ${s}\n`);
const nsName = (i: number): string => `fleet-${i}`;

/** mulberry32: a seeded PRNG, so every run (before and after a change) gets the same fleet. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = seeded(num('seed', 0, 2 ** 31));

/** Service j lives in namespace j % NAMESPACES; popularity is Zipf (weight 1/(rank+1)). */
const services = Array.from({ length: SERVICES }, (_, j) => ({
  ns: nsName(j % NAMESPACES),
  name: `svc-${j}`,
}));
const weights = services.map((_, j) => 1 / (j + 1));

function pickWeighted(pool: number[]): number {
  const total = pool.reduce((s, j) => s + (weights[j] ?? 0), 0);
  let x = rnd() * total;
  for (const j of pool) if ((x -= weights[j] ?? 0) <= 0) return j;
  return pool[pool.length - 1] ?? 0;
}

/**
 * Skewed subscriptions: most apps call few Services (count skewed towards --min-subs), half of
 * them in their own namespace, the rest drawn by cluster-wide popularity.
 */
function subscriptionsFor(home: number): string[] {
  const want = MIN_SUBS + Math.floor((MAX_SUBS - MIN_SUBS + 1) * rnd() ** 2);
  const own = services.map((_, j) => j).filter((j) => j % NAMESPACES === home);
  const all = services.map((_, j) => j);
  const chosen = new Set<number>();
  for (let guard = 0; chosen.size < Math.min(want, SERVICES) && guard < want * 50; guard++) {
    const pool =
      chosen.size % 2 === 0 ? own.filter((j) => !chosen.has(j)) : all.filter((j) => !chosen.has(j));
    if (pool.length > 0) chosen.add(pickWeighted(pool));
  }
  return [...chosen].map((j) => `${services[j]?.ns}/${services[j]?.name}`);
}

const slice = (ns: string, svc: string, addrs: string[]): Record<string, unknown> => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name: `${svc}-a`, namespace: ns, labels: { 'kubernetes.io/service-name': svc } },
  addressType: 'IPv4',
  endpoints: addrs.map((a) => ({ addresses: [a], conditions: { ready: true } })),
  ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
});
const addrsOf = (j: number, gen: number): string[] =>
  [0, 1, 2].map((k) => `10.${100 + (j >> 8)}.${j & 255}.${((gen * 3 + k) % 250) + 1}`);

async function pooled<T>(items: T[], width: number, fn: (x: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

async function populate(admin: KubeAdmin): Promise<void> {
  for (let i = 0; i < NAMESPACES; i++) {
    await admin.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: nsName(i) } });
    await admin.createServiceAccount(nsName(i), 'sidecar');
    await admin.bindSidecarRole(nsName(i), 'sidecar');
  }
  if (CHURN === 'controller') await ensureNode(admin);
  await pooled(
    services.map((s, j) => ({ ...s, j })),
    8,
    async ({ ns, name, j }) => {
      await admin.apply({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace: ns },
        spec: {
          ...(CHURN === 'controller' ? { selector: { app: name } } : {}),
          ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }],
        },
      });
      if (CHURN === 'slices') await admin.apply(slice(ns, name, addrsOf(j, 0)));
      else for (const ip of addrsOf(j, 0)) await startPod(admin, ns, name, ip);
    },
  );
  if (CHURN === 'controller') await untilControllerWrote(admin);
}

/** Waits until the EndpointSlice controller has written every Service's three ready endpoints. */
async function untilControllerWrote(admin: KubeAdmin): Promise<void> {
  const deadline = Date.now() + LIMIT_MS;
  for (;;) {
    const list = await admin.request<{
      items: { endpoints?: { conditions?: { ready?: boolean } }[] | null }[];
    }>('GET', '/apis/discovery.k8s.io/v1/endpointslices');
    const ready = list.items.flatMap((x) => x.endpoints ?? []).filter((e) => e.conditions?.ready).length;
    if (ready >= SERVICES * 3) return;
    if (Date.now() > deadline)
      throw new Error(`EndpointSlice controller: ${ready}/${SERVICES * 3} endpoints`);
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

/**
 * What an operator runs meanwhile: a kubeconfig for a user who may read, not in system:masters.
 * Its own role: the aggregated `view` role stays empty without the aggregation controller.
 */
async function operatorKubeconfig(cluster: TestCluster): Promise<string> {
  await cluster.admin.apply({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'outrigger-test-operator' },
    rules: [{ apiGroups: [''], resources: ['services', 'pods'], verbs: ['get', 'list', 'watch'] }],
  });
  await cluster.admin.apply({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'outrigger-test-operator' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'outrigger-test-operator' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'outrigger-test-operator' }],
  });
  const token = readFileSync(path.join(cluster.pkiDir, 'operator-token'), 'utf8').trim();
  const file = path.join(cluster.stateDir, 'operator.kubeconfig');
  const ca = Buffer.from(cluster.caPem).toString('base64');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: t, cluster: {server: "${cluster.server}", certificate-authority-data: ${ca}}}]`,
      `users: [{name: operator, user: {token: ${token}}}]`,
      'contexts: [{name: t, context: {cluster: t, user: operator}}]',
      'current-context: t',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return file;
}

// ---- children ----

interface Child {
  proc: ChildProcess;
  last?: ChildSample;
}

function startChildren(cluster: TestCluster, specs: SidecarSpec[], tuning: ChildStart['tuning']): Child[] {
  const file = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fleet-sidecars.ts');
  return Array.from({ length: PROCS }, (_, p) => {
    const proc = fork(file, [], { execArgv: ['--max-semi-space-size=4'], stdio: 'inherit' });
    const mine = specs.filter((_, i) => i % PROCS === p);
    const msg: ChildStart = {
      type: 'start',
      server: cluster.server,
      caPem: cluster.caPem,
      sidecars: mine,
      rampMs: num('ramp-s', 0, 600) * 1000,
      tuning,
    };
    proc.send(msg);
    return { proc };
  });
}

async function sampleChildren(children: Child[]): Promise<ChildSample[]> {
  return Promise.all(
    children.map(
      (c) =>
        new Promise<ChildSample>((resolve) => {
          const on = (m: { type: string }): void => {
            if (m.type !== 'sample') return;
            c.proc.off('message', on);
            c.last = m as ChildSample;
            resolve(c.last);
          };
          c.proc.on('message', on);
          c.proc.send({ type: 'sample' });
        }),
    ),
  );
}

const sidecarsOf = (s: ChildSample[]): SidecarSample[] => s.flatMap((c) => c.sidecars);
const requestsOf = (s: SidecarSample[]): { lists: number; watches: number } => ({
  lists: s.reduce((x, c) => x + c.lists, 0),
  watches: s.reduce((x, c) => x + c.watches, 0),
});

async function untilInSync(
  children: Child[],
  limitMs: number,
): Promise<{ ms: number; samples: ChildSample[] }> {
  const start = Date.now();
  for (;;) {
    const samples = await sampleChildren(children);
    const sc = sidecarsOf(samples);
    const synced = sc.filter((c) => c.inSync).length;
    if (sc.length === N && synced === N) return { ms: Date.now() - start, samples };
    if (Date.now() - start > limitMs) {
      say(`in sync: ${synced}/${N} after ${limitMs} ms; giving up`);
      return { ms: Number.POSITIVE_INFINITY, samples };
    }
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

// ---- phases ----

interface PhaseResult {
  seconds: number;
  apiRequestsByVerb: Record<string, number>;
  apiRps: number;
  peakRps?: number;
  throttled: number;
  apfRejected: number;
  apiserverCpuPct: number;
  apiserverRssMb: number;
  openWatches: number;
  registeredWatchers: number;
  sidecarLists: number;
  sidecarWatches: number;
  kubectlP50Ms: number;
  kubectlP99Ms: number;
  kubectlRuns: number;
}

function phase(
  a: ApiSample | undefined,
  b: ApiSample,
  ca: SidecarSample[],
  cb: SidecarSample[],
  kubectlMs: number[],
  peakRps?: number,
  fromMs?: number,
): PhaseResult {
  const seconds = Math.max(1, (b.at - (a?.at ?? fromMs ?? b.at)) / 1000);
  const byVerb = verbDelta(a, b);
  const ra = requestsOf(ca);
  const rb = requestsOf(cb);
  return {
    seconds: Math.round(seconds),
    apiRequestsByVerb: byVerb,
    apiRps: Math.round(sum(byVerb) / seconds),
    ...(peakRps !== undefined ? { peakRps } : {}),
    throttled: b.throttled - (a && a.throttled <= b.throttled ? a.throttled : 0),
    apfRejected: b.apfRejected - (a && a.apfRejected <= b.apfRejected ? a.apfRejected : 0),
    apiserverCpuPct: Math.round((b.cpuTicks - (a && a.cpuTicks <= b.cpuTicks ? a.cpuTicks : 0)) / seconds),
    apiserverRssMb: Math.round(b.rssBytes / 2 ** 20),
    openWatches: b.openWatches,
    registeredWatchers: b.registeredWatchers,
    sidecarLists: rb.lists - ra.lists,
    sidecarWatches: rb.watches - ra.watches,
    kubectlP50Ms: Math.round(percentile(kubectlMs, 50)),
    kubectlP99Ms: Math.round(percentile(kubectlMs, 99)),
    kubectlRuns: kubectlMs.length,
  };
}

async function must(cluster: TestCluster): Promise<ApiSample> {
  for (let i = 0; i < 20; i++) {
    const s = await sampleApi(cluster);
    if (s) return s;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error('kube-apiserver /metrics did not answer');
}

/** One rolling-update step: the new Pod starts and turns Ready, then the old one terminates. */
async function replacePod(
  admin: KubeAdmin,
  ns: string,
  app: string,
  oldIp: string,
  newIp: string,
): Promise<void> {
  const name = await createPod(admin, ns, app, newIp);
  await setPodStatus(admin, ns, name, newIp, false);
  await setPodStatus(admin, ns, name, newIp, true);
  await stopPod(admin, ns, podName(app, oldIp), { terminatingMs: 200 });
}

async function churn(admin: KubeAdmin, ms: number, ratePerS: number): Promise<number> {
  // Rolling update of one Service: its three pods replaced one at a time.
  const gen = new Map<number, number>();
  const deadline = Date.now() + ms;
  let writes = 0;
  while (Date.now() < deadline) {
    const j = pickWeighted(services.map((_, k) => k));
    const s = services[j];
    if (!s) continue;
    const g = gen.get(j) ?? 0;
    // A step cut short by the deadline still finishes, so the next rollout starts from whole pods.
    for (let step = 1; step <= 3; step++) {
      const next = addrsOf(j, g + 1)
        .slice(0, step)
        .concat(addrsOf(j, g).slice(step));
      const write =
        CHURN === 'slices'
          ? admin.patch('EndpointSlice', `${s.name}-a`, s.ns, slice(s.ns, s.name, next))
          : replacePod(admin, s.ns, s.name, addrsOf(j, g)[step - 1] ?? '', next[step - 1] ?? '');
      await write.then(() => writes++).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 1000 / ratePerS));
    }
    gen.set(j, g + 1);
  }
  return writes;
}

async function main(): Promise<void> {
  say(`starting a test cluster; ${N} sidecars in ${PROCS} processes`);
  const cluster = await startCluster(undefined, {
    controllerManager: CHURN === 'controller',
    priorityAndFairness: flags.apf,
  });
  if (!cluster) throw new Error('no test cluster: run scripts/test-cluster build first');
  const kubectl = /kubectl=(\S+)/.exec(
    execFileSync('bash', [path.join(repoRoot, 'scripts/test-cluster'), 'paths'], { encoding: 'utf8' }),
  )?.[1];
  if (!kubectl) throw new Error('scripts/test-cluster paths printed no kubectl');
  const kubeconfig = flags.apf ? await operatorKubeconfig(cluster) : cluster.kubeconfigPath;
  const probe = (): ReturnType<typeof kubectlProbe> => kubectlProbe(kubectl, kubeconfig, nsName(0));
  let children: Child[] = [];
  try {
    say(`creating ${NAMESPACES} namespaces, ${SERVICES} Services and their EndpointSlices`);
    await populate(cluster.admin);
    const specs: SidecarSpec[] = [];
    for (let i = 0; i < N; i++) {
      const home = i % NAMESPACES;
      const token = await cluster.admin.mintToken(nsName(home), 'sidecar', { expirationSeconds: 7200 });
      specs.push({ ns: nsName(home), token, subs: subscriptionsFor(home) });
    }
    const subsPerSidecar = specs.map((s) => s.subs.length);
    const nsPerSidecar = specs.map((s) => new Set(s.subs.map((k) => k.split('/')[0])).size);
    const [min, max] = WATCH_TIMEOUT_S.map((x) => x / TIME_SCALE) as [number, number];
    const tuning: ChildStart['tuning'] =
      TIME_SCALE === 1 ? undefined : { reflector: { watchTimeoutS: [min, max] } };

    // Start.
    let k = probe();
    const a0 = await must(cluster);
    children = startChildren(cluster, specs, tuning);
    const started = await untilInSync(children, LIMIT_MS);
    const a1 = await must(cluster);
    const start = phase(a0, a1, [], sidecarsOf(started.samples), await k.stop());
    say(`start: every sidecar in sync after ${started.ms} ms`);

    // Idle.
    const idleMs = num('idle-s', 0, 3600) * 1000;
    k = probe();
    await new Promise((r) => setTimeout(r, idleMs));
    const c2 = await sampleChildren(children);
    const a2 = await must(cluster);
    const idle = phase(a1, a2, sidecarsOf(started.samples), sidecarsOf(c2), await k.stop());
    const idleReq = idle.sidecarLists + idle.sidecarWatches;
    const perSidecarHour = idleMs > 0 ? (idleReq / N) * (3_600_000 / (idleMs * TIME_SCALE)) : NaN;
    say(`idle: ${idleReq} sidecar requests in ${idleMs / 1000} s (time scale ${TIME_SCALE})`);

    // Churn.
    k = probe();
    const writes = await churn(cluster.admin, num('churn-s', 0, 3600) * 1000, num('churn-rate', 0.1, 100));
    const c3 = await sampleChildren(children);
    const a3 = await must(cluster);
    const churned = phase(a2, a3, sidecarsOf(c2), sidecarsOf(c3), await k.stop());
    say(`churn: ${writes} ${CHURN === 'slices' ? 'slice writes' : 'pod replacements'}`);

    // Outage and the reconnect wave.
    const outageMs = num('outage-s', 0, 600) * 1000;
    await cluster.apiserverStop();
    await new Promise((r) => setTimeout(r, outageMs));
    const c4 = await sampleChildren(children);
    // The wave starts with the API server process: it serves requests before /readyz says so.
    // Scraping starts with it too (failures ignored until it listens); kubectl once it is ready.
    const back = Date.now();
    let readyMs = NaN;
    const starting = cluster.apiserverStart().then(() => {
      readyMs = Date.now() - back;
      k = probe();
    });
    let peak = 0;
    let prev: ApiSample | undefined;
    let synced = Number.POSITIVE_INFINITY;
    const series: [number, number][] = [];
    let lastChildren = c4;
    while (Date.now() - back < LIMIT_MS) {
      const s = await sampleApi(cluster);
      if (s) {
        // Per-second rate between consecutive scrapes (the first covers the time since restart).
        const since = prev ? prev.at : back;
        const got = prev ? sum(verbDelta(prev, s)) : sum(s.byVerb);
        peak = Math.max(peak, Math.round(got / Math.max(1, (s.at - since) / 1000)));
        prev = s;
        series.push([s.at - back, sum(s.byVerb)]);
      }
      lastChildren = await sampleChildren(children);
      if (sidecarsOf(lastChildren).every((c) => c.inSync)) {
        synced = Date.now() - back;
        break;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    await starting;
    const a5 = await must(cluster);
    // Counters restarted with the API server: the wave is everything since it came back.
    const wave = phase(undefined, a5, sidecarsOf(c4), sidecarsOf(lastChildren), await k.stop(), peak, back);
    series.push([a5.at - back, sum(a5.byVerb)]);
    const total = series[series.length - 1]?.[1] ?? 0;
    const when = (f: number): number => series.find(([, n]) => n >= f * total)?.[0] ?? NaN;
    // How long the wave lasted: from 10 % to 90 % of its requests (API server counters, 0.5 s scrapes).
    const spreadMs = when(0.9) - when(0.1);
    // And nearly all of it (1 to 99 %): the API server's own start-up requests are in the first 1 %.
    const fullSpreadMs = when(0.99) - when(0.01);
    say(`reconnect wave: every sidecar in sync ${synced} ms after apiserver-start`);

    const last = sidecarsOf(lastChildren);
    const rss = lastChildren.reduce((s, c) => s + c.rssBytes - c.baseRssBytes, 0);
    const result = {
      label: flags.label,
      when: new Date().toISOString(),
      machine: {
        cpus: (await import('node:os')).cpus().length,
        loadavg: (await import('node:os')).loadavg(),
      },
      config: {
        sidecars: N,
        procs: PROCS,
        namespaces: NAMESPACES,
        services: SERVICES,
        subsPerSidecar: {
          min: Math.min(...subsPerSidecar),
          max: Math.max(...subsPerSidecar),
          mean: mean(subsPerSidecar),
        },
        namespacesPerSidecar: { mean: mean(nsPerSidecar), max: Math.max(...nsPerSidecar) },
        timeScale: TIME_SCALE,
        churn: CHURN,
        priorityAndFairness: flags.apf,
        watchTimeoutS: WATCH_TIMEOUT_S,
        idleS: idleMs / 1000,
        outageS: outageMs / 1000,
      },
      perSidecar: {
        startRequests: (start.sidecarLists + start.sidecarWatches) / N,
        idleRequestsPerHour: round1(perSidecarHour),
        // What the open watches cost at steady state: each is renewed once per mean timeout.
        idleRequestsPerHourExpected: round1(
          (mean(last.map((c) => c.openWatches)) * 3600) / ((WATCH_TIMEOUT_S[0]! + WATCH_TIMEOUT_S[1]!) / 2),
        ),
        openWatches: round1(mean(last.map((c) => c.openWatches))),
        watchesMax: Math.max(...last.map((c) => c.openWatches)),
        waveLists: round1(wave.sidecarLists / N),
        waveWatches: round1(wave.sidecarWatches / N),
        memoryKb: Math.round(rss / N / 1024),
      },
      start,
      idle,
      churn: { ...churned, kind: CHURN, steps: writes },
      wave: { ...wave, inSyncMs: synced, spreadMs, fullSpreadMs, readyMs },
    };
    printTable(result);
    if (flags.json) writeFileSync(flags.json, JSON.stringify(result, null, 2) + '\n');
  } finally {
    for (const c of children) c.proc.send({ type: 'stop' });
    await Promise.all(children.map((c) => new Promise((r) => c.proc.once('exit', r))));
    await cluster.stop();
  }
}

const mean = (xs: number[]): number => round1(xs.reduce((a, b) => a + b, 0) / (xs.length || 1));
const round1 = (x: number): number => Math.round(x * 10) / 10;

function printTable(r: {
  label: string | undefined;
  perSidecar: Record<string, number>;
  start: PhaseResult;
  idle: PhaseResult;
  churn: PhaseResult;
  wave: PhaseResult & { inSyncMs: number; spreadMs: number; fullSpreadMs: number; readyMs: number };
}): void {
  const rows: [string, ...PhaseResult[]] = ['phase', r.start, r.idle, r.churn, r.wave];
  const names = ['start', 'idle', 'churn', 'wave'];
  const line = (cells: (string | number)[]): string => cells.map((c) => String(c).padStart(12)).join('');
  const out = [`fleet ${r.label ?? ''}: ${N} sidecars`, line(['', ...names])];
  const fields: [string, (p: PhaseResult) => string | number][] = [
    ['seconds', (p) => p.seconds],
    ['api req/s', (p) => p.apiRps],
    ['peak req/s', (p) => p.peakRps ?? ''],
    ['LIST', (p) => p.apiRequestsByVerb.LIST ?? 0],
    ['WATCH', (p) => p.apiRequestsByVerb.WATCH ?? 0],
    ['429s', (p) => p.throttled],
    ['APF rejected', (p) => p.apfRejected],
    ['open watches', (p) => p.openWatches],
    ['apisrv CPU%', (p) => p.apiserverCpuPct],
    ['apisrv MB', (p) => p.apiserverRssMb],
    ['kubectl p50', (p) => p.kubectlP50Ms],
    ['kubectl p99', (p) => p.kubectlP99Ms],
  ];
  for (const [name, f] of fields) out.push(line([name, ...rows.slice(1).map((p) => f(p as PhaseResult))]));
  out.push(
    `after apiserver-start: /readyz ${r.wave.readyMs} ms, every sidecar in sync ${r.wave.inSyncMs} ms; ` +
      `wave 10-90 %: ${r.wave.spreadMs} ms, 1-99 %: ${r.wave.fullSpreadMs} ms`,
  );
  out.push(`per sidecar: ${JSON.stringify(r.perSidecar)}`);
  process.stdout.write(out.join('\n') + '\n');
}

await main();
