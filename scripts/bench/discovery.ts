// Discovery benchmark (a script, not a test). Every loop is bounded in count and time; traffic
// goes only to a loopback kube-apiserver started here.
//   node --expose-gc scripts/bench/discovery.ts [--quick] [--no-cluster]
// 1. lookup latency from cache (peek and resolve of subscribed Services)
// 2. memory per 1,000 endpoints (heap after GC, raw slices + merged view)
// 3. event apply rate (EndpointSlice MODIFIED events through reflector, store and merge)
// 4. API requests per subscribed Service per idle hour (simulated hour on a fake clock)
// 5. RSS of a sidecar-like process with 100 Services subscribed against a real kube-apiserver
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FakeKubeApi } from '../../test/harness/fake-kube-api.ts';
import type { KubeApi, WatchEvent } from '../../src/kube/api.ts';
import { createKubeResolver, type KubeResolver } from '../../src/discovery/resolver.ts';
import { FakeClock } from '../../test/harness/fake-clock.ts';
import { createLogger } from '../../src/shared/log.ts';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const gc = (globalThis as { gc?: () => void }).gc;
const SLICES = (ns: string): string => `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;
const silent = createLogger({ level: 'error', write: () => undefined });

function fullGc(): void {
  if (!gc) throw new Error('run with node --expose-gc');
  for (let i = 0; i < 3; i++) gc();
}

function populate(api: FakeKubeApi, services: number, endpointsPerService: number, perSlice = 100): void {
  for (let s = 0; s < services; s++) {
    const name = `svc-${s}`;
    api.put('/api/v1/services', {
      metadata: { name, namespace: 'bench' },
      spec: { clusterIP: `10.96.${s >> 8}.${s & 255}`, ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
    } as never);
    for (let first = 0, n = 0; first < endpointsPerService; first += perSlice, n++) {
      const count = Math.min(perSlice, endpointsPerService - first);
      api.put(SLICES('bench'), slice(name, `${name}-${n}`, s, first, count, true) as never);
    }
  }
}

function slice(svc: string, name: string, s: number, first: number, count: number, ready: boolean): object {
  return {
    metadata: {
      name,
      namespace: 'bench',
      labels: { 'kubernetes.io/service-name': svc },
      managedFields: [
        { manager: 'kube-controller-manager', operation: 'Update', fieldsV1: { 'f:endpoints': {} } },
      ],
    },
    addressType: 'IPv4',
    endpoints: Array.from({ length: count }, (_, i) => ({
      addresses: [`10.${(s >> 8) + 100}.${s & 255}.${first + i}`],
      conditions: { ready: i === 0 ? ready : true, serving: true, terminating: false },
      nodeName: `node-${i % 20}`,
      zone: `zone-${i % 3}`,
      targetRef: {
        kind: 'Pod',
        name: `${svc}-pod-${first + i}`,
        namespace: 'bench',
        uid: '00000000-0000-0000-0000-000000000000',
      },
    })),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  };
}

async function resolverOver(api: KubeApi, clock: FakeClock, maxWatches: number): Promise<KubeResolver> {
  const r = await createKubeResolver({
    api,
    clock,
    random: Math.random,
    logger: silent,
    maxWatches,
    serviceScope: 'cluster',
  });
  await clock.advance(0);
  return r;
}

async function subscribeAll(r: KubeResolver, clock: FakeClock, services: number): Promise<void> {
  for (let s = 0; s < services; s++) {
    const p = r.resolve({ namespace: 'bench', name: `svc-${s}` });
    await clock.advance(0);
    await p;
  }
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

async function lookupLatency(): Promise<Record<string, string>> {
  const services = 1_000;
  const api = new FakeKubeApi();
  populate(api, services, 10);
  const clock = new FakeClock();
  const r = await resolverOver(api, clock, services);
  await subscribeAll(r, clock, services);
  const batches: number[] = [];
  const resolveBatches: number[] = [];
  const BATCH = 1_000;
  const deadline = Date.now() + (quick ? 1_500 : 5_000);
  for (let b = 0; b < 2_000 && Date.now() < deadline; b++) {
    let t = process.hrtime.bigint();
    for (let i = 0; i < BATCH; i++) r.peek({ namespace: 'bench', name: `svc-${(b * BATCH + i) % services}` });
    batches.push(Number(process.hrtime.bigint() - t) / BATCH);
    t = process.hrtime.bigint();
    for (let i = 0; i < BATCH; i++)
      await r.resolve({ namespace: 'bench', name: `svc-${(b * BATCH + i) % services}` });
    resolveBatches.push(Number(process.hrtime.bigint() - t) / BATCH);
  }
  await r.close();
  batches.sort((a, b) => a - b);
  resolveBatches.sort((a, b) => a - b);
  return {
    'peek() per lookup, p50 / p99 of 1,000-lookup batches': `${percentile(batches, 50).toFixed(0)} ns / ${percentile(batches, 99).toFixed(0)} ns`,
    'resolve() per lookup (await), p50 / p99': `${percentile(resolveBatches, 50).toFixed(0)} ns / ${percentile(resolveBatches, 99).toFixed(0)} ns`,
    lookups: String(batches.length * BATCH * 2),
  };
}

async function heapFor(services: number, endpoints: number): Promise<number> {
  const api = new FakeKubeApi();
  populate(api, services, endpoints);
  const clock = new FakeClock();
  fullGc();
  const before = process.memoryUsage().heapUsed;
  const r = await resolverOver(api, clock, services);
  await subscribeAll(r, clock, services);
  fullGc();
  const after = process.memoryUsage().heapUsed;
  await r.close();
  return after - before;
}

async function memory(): Promise<Record<string, string>> {
  // The fake API's own copies are allocated before the baseline, so the delta is the resolver's.
  const big = await heapFor(100, 100);
  const small = await heapFor(100, 1);
  const perService = small / 100;
  const per1000 = ((big - small) / (100 * 99)) * 1000;
  return {
    'heap per 1,000 endpoints (raw slices + merged view)': `${(per1000 / 1024).toFixed(0)} KiB`,
    'heap per subscribed Service (1 endpoint, reflector, store)': `${(perService / 1024).toFixed(1)} KiB`,
    '100 Services x 100 endpoints, total': `${(big / 1024 / 1024).toFixed(1)} MiB`,
  };
}

async function eventRate(): Promise<Record<string, string>> {
  const api = new FakeKubeApi();
  populate(api, 1, 100, 50);
  const clock = new FakeClock();
  const r = await resolverOver(api, clock, 10);
  await subscribeAll(r, clock, 1);
  const max = quick ? 5_000 : 20_000;
  const deadline = Date.now() + 10_000;
  const t = process.hrtime.bigint();
  let n = 0;
  for (; n < max && Date.now() < deadline; n++)
    api.put(SLICES('bench'), slice('svc-0', 'svc-0-0', 0, 0, 50, n % 2 === 0) as never);
  const secs = Number(process.hrtime.bigint() - t) / 1e9;
  await r.close();
  return {
    'EndpointSlice events applied per second (100-endpoint Service, merge per event)': `${Math.round(n / secs).toLocaleString('en')}`,
    events: String(n),
  };
}

/** FakeKubeApi whose watches end after their timeoutSeconds on the fake clock, like the API server. */
class TimedApi implements KubeApi {
  readonly inner: FakeKubeApi;
  readonly clock: FakeClock;
  constructor(inner: FakeKubeApi, clock: FakeClock) {
    this.inner = inner;
    this.clock = clock;
  }
  list = (p: string, q: Record<string, string>, s: AbortSignal) => this.inner.list(p, q, s);
  watch(
    path: string,
    query: Record<string, string>,
    handlers: { onOpen(): void; onEvent(e: WatchEvent): void },
    signal: AbortSignal,
  ): Promise<void> {
    const ac = new AbortController();
    const onAbort = (): void => ac.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    let timedOut = false;
    // The server's timeoutSeconds: this watch (only this one) ends cleanly.
    const timer = this.clock.setTimer(Number(query.timeoutSeconds ?? 600) * 1000, () => {
      timedOut = true;
      ac.abort();
    });
    return this.inner
      .watch(path, query, handlers, ac.signal)
      .catch((e: unknown) => {
        if (!timedOut) throw e;
      })
      .finally(() => {
        timer.cancel();
        signal.removeEventListener('abort', onAbort);
      });
  }
}

async function idleRequests(): Promise<Record<string, string>> {
  const services = 100;
  const inner = new FakeKubeApi();
  populate(inner, services, 3);
  const clock = new FakeClock();
  const r = await resolverOver(new TimedApi(inner, clock), clock, services);
  await subscribeAll(r, clock, services);
  const start = inner.calls.length;
  for (let m = 0; m < 60; m++) await clock.advance(60_000);
  const calls = inner.calls.slice(start);
  await r.close();
  const perHour = calls.length / services;
  const lists = calls.filter((c) => c.op === 'list').length;
  return {
    'API requests per subscribed Service per idle hour (watch timeouts 5-10 min; the 100 Services share one namespace, so 1 slice watch + the Service watch; fleet figures: scripts/bench/fleet.ts)':
      perHour.toFixed(1),
    'of which relists': String(lists),
  };
}

// ---- 5. RSS with a real kube-apiserver ----
// The sidecar runs compiled JavaScript (bin/outrigger.js -> dist/), and Node's TypeScript stripping
// alone adds ~16 MB RSS, so the child runs a build of src/ made here with the project's tsc.

type Variant = 'bare' | 'discovery' | 'sidecar-like' | 'sidecar-like+client-node';

const childSource = `
import { createServer } from 'node:http';
const variant = process.env.BENCH_VARIANT;
const server = createServer((_q, s) => s.end('ok'));
await new Promise((r) => server.listen(0, '127.0.0.1', r));
if (variant.startsWith('sidecar-like')) {
  // The other libraries outrigger proxy loads.
  await Promise.all(['http-proxy', 'prom-client', 'commander', 'yaml', 'lru-cache', 'protobufjs',
    '@opentelemetry/api', '@opentelemetry/sdk-trace', '@opentelemetry/exporter-trace-otlp-proto',
    '@opentelemetry/propagator-b3', '@opentelemetry/resources'].map((m) => import(m)));
}
if (variant === 'sidecar-like+client-node') await import('@kubernetes/client-node');
if (variant !== 'bare') {
  const { createDiscovery } = await import('./dist/discovery/index.js');
  const { systemClock, systemRandom } = await import('./dist/shared/clock.js');
  const { createLogger } = await import('./dist/shared/log.js');
  const url = new URL(process.env.BENCH_SERVER);
  const d = await createDiscovery(
    { source: { kind: 'kube' }, kubeconfig: undefined, tokenDir: process.env.BENCH_TOKEN_DIR, namespace: undefined,
      capture: 'transparent', maxWatches: 500, snapshot: undefined },
    { clock: systemClock, random: systemRandom, logger: createLogger({ level: 'error' }),
      env: { KUBERNETES_SERVICE_HOST: url.hostname, KUBERNETES_SERVICE_PORT: url.port } },
  );
  const n = Number(process.env.BENCH_SERVICES);
  for (let i = 0; i < n; i++) {
    const res = await d.resolve({ namespace: process.env.BENCH_NS, name: 'svc-' + i });
    if (res.kind !== 'found') throw new Error('svc-' + i + ': ' + res.kind);
  }
  for (let i = 0; i < 50 && d.status().watches < n; i++) await new Promise((r) => setTimeout(r, 100));
  process.stderr.write(variant + ': ' + d.status().watches + ' watches open\\n');
}
await new Promise((r) => setTimeout(r, 3000));
for (let i = 0; i < 3; i++) gc();
await new Promise((r) => setTimeout(r, 500));
process.stdout.write(JSON.stringify(process.memoryUsage()) + '\\n');
process.exit(0);
`;

function buildForRss(): string {
  const root = join(import.meta.dirname, '..');
  const dir = join(root, 'node_modules/.cache/outrigger-bench');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const tsc = spawnSync(
    join(root, 'node_modules/.bin/tsc'),
    ['-p', 'tsconfig.build.json', '--outDir', join(dir, 'dist'), '--sourceMap', 'false'],
    {
      cwd: root,
      encoding: 'utf8',
    },
  );
  // Type errors elsewhere in src/ (work in progress) still emit; only missing output is fatal.
  if (!existsSync(join(dir, 'dist/discovery/index.js')))
    throw new Error(`tsc failed: ${tsc.stdout}${tsc.stderr}`);
  if (tsc.status !== 0)
    console.error(`note: tsc reported errors outside discovery:\n${tsc.stdout.slice(0, 500)}`);
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
  writeFileSync(join(dir, 'child.mjs'), childSource);
  return dir;
}

async function rss(): Promise<Record<string, string>> {
  const { startCluster } = await import('../../test/harness/cluster.ts');
  const { createService, createSlice, sidecarIdentity } = await import('../../test/harness/discovery.ts');
  const dir = buildForRss();
  const cluster = await startCluster();
  if (!cluster) throw new Error('no cluster');
  const out: Record<string, string> = {};
  try {
    const ns = await cluster.admin.createNamespace('bench');
    const id = await sidecarIdentity(cluster, ns);
    const services = 100;
    for (let i = 0; i < services; i++) {
      await createService(cluster.admin, ns, `svc-${i}`);
      await createSlice(
        cluster.admin,
        ns,
        `svc-${i}`,
        `svc-${i}-a`,
        Array.from({ length: 10 }, (_, j) => `10.70.${i}.${j + 1}`),
      );
    }
    const variants: [Variant, string[]][] = [
      ['bare', []],
      ['discovery', []],
      ['sidecar-like', []],
      ['sidecar-like', ['--max-semi-space-size=1']],
      ['sidecar-like+client-node', []],
    ];
    for (const [variant, flags] of variants) {
      const mem = await new Promise<NodeJS.MemoryUsage>((resolve, reject) => {
        const child = spawn(process.execPath, ['--expose-gc', ...flags, join(dir, 'child.mjs')], {
          env: {
            ...process.env,
            BENCH_VARIANT: variant,
            BENCH_SERVER: cluster.server,
            BENCH_TOKEN_DIR: id.dir,
            BENCH_NS: ns,
            BENCH_SERVICES: String(services),
          },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let text = '';
        const kill = setTimeout(() => child.kill('SIGKILL'), 60_000);
        child.stdout.on('data', (d: Buffer) => (text += d.toString()));
        child.on('exit', (code) => {
          clearTimeout(kill);
          if (code === 0) resolve(JSON.parse(text) as NodeJS.MemoryUsage);
          else reject(new Error(`${variant} exited ${code}`));
        });
      });
      const what =
        variant === 'bare'
          ? 'HTTP server only'
          : `${variant}, ${services} Services (1,000 endpoints) subscribed`;
      out[`RSS after GC: ${what}${flags.length ? ` (${flags.join(' ')})` : ''}`] =
        `${(mem.rss / 1024 / 1024).toFixed(1)} MB (heap ${(mem.heapUsed / 1024 / 1024).toFixed(1)} MB)`;
    }
    id.cleanup();
  } finally {
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  return out;
}

{
  const sections: [string, () => Promise<Record<string, string>>][] = [
    ['Lookup latency from cache (1,000 subscribed Services, 10 endpoints each)', lookupLatency],
    ['Memory', memory],
    ['Event apply rate', eventRate],
    ['Idle API load (simulated hour, 100 subscriptions)', idleRequests],
  ];
  if (!args.includes('--no-cluster')) sections.push(['Sidecar RSS against a real kube-apiserver', rss]);
  console.log(`# Discovery benchmark (Node ${process.version}, ${new Date().toISOString()})\n`);
  for (const [title, fn] of sections) {
    const res = await fn();
    console.log(`## ${title}\n\n| measure | value |\n|---|---|`);
    for (const [k, v] of Object.entries(res)) console.log(`| ${k} | ${v} |`);
    console.log('');
  }
}
