// One target's measurement: RSS at start, warm-up, closed loops per workload (throughput and CPU per
// request from /proc), then a fixed-rate phase with coordinated-omission correction (latency, CPU
// per 1,000 rps, RSS under load, and for Outrigger the event-loop delay from its /metrics).
import { httpGet } from '../../test/harness/http-get.ts';
import { closedLoop, fixedRate, type FixedRateResult, type Percentiles } from './loadgen.ts';
import type { BenchTarget } from './peers.ts';
import { cpuSeconds, killGroup, rssMb, sleep, tree, waitPort } from './procs.ts';
import { wrk, type ClosedResult, type Workload } from './workloads.ts';

export interface MeasureOptions {
  warmMs: number;
  closedMs: number;
  fixedMs: number;
  rate: number;
  connections: number;
  /** Closed-loop workloads; an empty list skips the closed loop. */
  workloads: readonly Workload[];
  fixed: boolean;
}

export interface Closed extends ClosedResult {
  tool: string;
  /** Target CPU (user + system) per request in the closed loop, microseconds. */
  cpuUsPerReq: number;
}

export interface EventLoopDelay {
  p50: number;
  p99: number;
  max: number;
}

export interface Row {
  name: string;
  closed: Record<string, Closed>;
  /** Closed-loop rps of the first workload, per round. */
  rounds: number[];
  fixed?: FixedRateResult;
  cpuPer1k: number;
  /** RSS after start-up, before any request. */
  rssStart: number;
  /** RSS after the warm-up and 1 s of rest (V8 keeps a grown heap: a post-load figure). */
  rssIdle: number;
  /** Maximum RSS sampled every 200 ms during every load phase. */
  rssLoad: number;
  /** Milliseconds, during the fixed-rate phase (sum over the target's sidecars: worst one). */
  eld?: EventLoopDelay;
  note?: string;
}

const METRIC = /^outrigger_event_loop_delay_seconds\{quantile="([^"]+)"\} (\S+)$/gm;

async function eventLoopDelay(ports: number[]): Promise<EventLoopDelay | undefined> {
  let out: EventLoopDelay | undefined;
  for (const port of ports) {
    const { status, body } = await httpGet(port, '/metrics');
    if (status !== 200) continue;
    const q = new Map([...body.matchAll(METRIC)].map((m) => [m[1], Number(m[2]) * 1000]));
    // A build without outrigger_event_loop_delay_seconds: prom-client's own gauges measure the
    // same (monitorEventLoopDelay at 10 ms, reset at each scrape).
    for (const [quantile, name] of [
      ['0.5', 'p50'],
      ['0.99', 'p99'],
      ['1', 'max'],
    ] as const) {
      const v = new RegExp(`^outrigger_(?:process_)?nodejs_eventloop_lag_${name}_seconds (\\S+)$`, 'm').exec(
        body,
      );
      if (!q.has(quantile) && v) q.set(quantile, Number(v[1]) * 1000);
    }
    if (!q.has('1')) continue;
    const e = { p50: q.get('0.5') ?? NaN, p99: q.get('0.99') ?? NaN, max: q.get('1') ?? NaN };
    out = !out
      ? e
      : { p50: Math.max(out.p50, e.p50), p99: Math.max(out.p99, e.p99), max: Math.max(out.max, e.max) };
  }
  return out;
}

export async function measure(t: BenchTarget, o: MeasureOptions): Promise<Row> {
  const procs = await t.start();
  await (t.ready ? t.ready() : waitPort(t.port));
  const pids = procs.flatMap((p) => (p.pid ? tree(p.pid) : []));
  const target = { host: '127.0.0.1', port: t.port, authority: t.authority };
  await sleep(1_000);
  const rssStart = rssMb(pids);
  // Warm up (JIT, pools), then settle so the idle RSS is after the warm-up's garbage.
  await closedLoop(target, { connections: o.connections, durationMs: o.warmMs });
  await sleep(1_000);
  const rssIdle = rssMb(pids);
  let rssLoad = rssIdle;
  const sampler = setInterval(() => (rssLoad = Math.max(rssLoad, rssMb(pids))), 200);
  try {
    const closed: Record<string, Closed> = {};
    for (const w of o.workloads) {
      const before = cpuSeconds(pids);
      let r = wrk(t.port, t.authority, o.closedMs, o.connections, w);
      let tool = `wrk -t1 -c${o.connections}`;
      if (!r && w.method === 'GET') {
        const n = await closedLoop(
          { ...target, path: w.path },
          { connections: o.connections, durationMs: o.closedMs },
        );
        r = { rps: n.rps, p50: n.latency.p50, p99: n.latency.p99, requests: n.ok, errors: n.errors };
        tool = `node generator, ${o.connections} conns`;
      }
      if (!r) continue;
      const cpu = cpuSeconds(pids) - before;
      closed[w.name] = { ...r, tool, cpuUsPerReq: pids.length === 0 ? NaN : (cpu / r.requests) * 1e6 };
      await sleep(500);
    }
    let fixed: FixedRateResult | undefined;
    let cpuPer1k = NaN;
    let eld: EventLoopDelay | undefined;
    if (o.fixed) {
      await eventLoopDelay(t.adminPorts ?? []); // restarts the window
      const before = cpuSeconds(pids);
      fixed = await fixedRate(target, { rate: o.rate, durationMs: o.fixedMs, connections: 32 });
      const cores = (cpuSeconds(pids) - before) / (o.fixedMs / 1000);
      eld = await eventLoopDelay(t.adminPorts ?? []);
      cpuPer1k = pids.length === 0 ? NaN : cores / (fixed.achievedRps / 1000);
    }
    const first = Object.values(closed)[0];
    return {
      name: t.name,
      closed,
      rounds: first ? [first.rps] : [],
      ...(fixed ? { fixed } : {}),
      cpuPer1k,
      rssStart,
      rssIdle,
      rssLoad,
      ...(eld ? { eld } : {}),
      ...(t.note ? { note: t.note } : {}),
    };
  } finally {
    clearInterval(sampler);
    for (const p of procs) killGroup(p, 'SIGKILL');
    await sleep(300);
  }
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

function meanPercentiles(list: Percentiles[]): Percentiles {
  return {
    p50: mean(list.map((p) => p.p50)),
    p90: mean(list.map((p) => p.p90)),
    p99: mean(list.map((p) => p.p99)),
    p999: mean(list.map((p) => p.p999)),
    max: Math.max(...list.map((p) => p.max)),
  };
}

/** Means over rounds; percentiles are averaged per round, not merged; maxima stay maxima. */
export function combine(list: Row[]): Row {
  const first = list[0]!;
  const closed: Record<string, Closed> = {};
  for (const name of Object.keys(first.closed)) {
    const rs = list.map((r) => r.closed[name]).filter((c): c is Closed => c !== undefined);
    closed[name] = {
      tool: rs[0]!.tool,
      rps: mean(rs.map((c) => c.rps)),
      p50: mean(rs.map((c) => c.p50)),
      p99: mean(rs.map((c) => c.p99)),
      requests: rs.reduce((a, c) => a + c.requests, 0),
      errors: rs.reduce((a, c) => a + c.errors, 0),
      cpuUsPerReq: mean(rs.map((c) => c.cpuUsPerReq)),
    };
  }
  const fixeds = list.map((r) => r.fixed).filter((f): f is FixedRateResult => f !== undefined);
  const elds = list.map((r) => r.eld).filter((e): e is EventLoopDelay => e !== undefined);
  return {
    ...first,
    closed,
    rounds: list.flatMap((r) => r.rounds),
    ...(fixeds.length > 0
      ? {
          fixed: {
            due: fixeds.reduce((a, f) => a + f.due, 0),
            ok: fixeds.reduce((a, f) => a + f.ok, 0),
            errors: fixeds.reduce((a, f) => a + f.errors, 0),
            achievedRps: mean(fixeds.map((f) => f.achievedRps)),
            corrected: meanPercentiles(fixeds.map((f) => f.corrected)),
            service: meanPercentiles(fixeds.map((f) => f.service)),
            lag: meanPercentiles(fixeds.map((f) => f.lag)),
          },
        }
      : {}),
    cpuPer1k: mean(list.map((r) => r.cpuPer1k)),
    rssStart: mean(list.map((r) => r.rssStart)),
    rssIdle: mean(list.map((r) => r.rssIdle)),
    rssLoad: Math.max(...list.map((r) => r.rssLoad)),
    ...(elds.length > 0
      ? {
          eld: {
            p50: mean(elds.map((e) => e.p50)),
            p99: mean(elds.map((e) => e.p99)),
            max: Math.max(...elds.map((e) => e.max)),
          },
        }
      : {}),
  };
}

/** Every target in order, `rounds` times, the order reversed every other round (drift hits all alike). */
export async function rounds(targets: BenchTarget[], n: number, o: MeasureOptions): Promise<Row[]> {
  const runs = new Map<string, Row[]>();
  for (let round = 0; round < n; round++) {
    for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
      process.stderr.write(`bench: round ${round + 1}/${n}: ${t.name} ...\n`);
      const list = runs.get(t.name) ?? [];
      list.push(await measure(t, o));
      runs.set(t.name, list);
    }
  }
  return targets.map((t) => combine(runs.get(t.name) ?? []));
}
