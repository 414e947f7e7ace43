// Side-by-side data-path benchmark: every target in ONE run, in front of the SAME backend (an
// nginx worker), on loopback only, each phase bounded in time.
//   node scripts/bench/run.ts [--quick] [--rounds 2] [--only a,b] [--rate 1000] [--closed-s 8]
//        [--fixed-s 10] [--workloads small,1k,post4k] [--fixed-only] [--closed-only]
//        [--semi-space 1,2,4,8,16,default,2+optimize-for-size] [--baseline REF] [--pin] [--ts] [--json FILE]
// Per target: RSS at start; closed-loop throughput and CPU per request for each workload (wrk
// -t1 -c50, or the Node generator without wrk); then a fixed rate with coordinated-omission
// correction (p50/p99), CPU per 1,000 rps, RSS under load and (Outrigger) the event-loop delay.
// Results print as Markdown tables with ratios to the peers of the same run.
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { compiledBuild, refBuild, sourcesBuild } from './build.ts';
import { rounds, type MeasureOptions } from './measure.ts';
import { gatewayTargets } from './gateway-targets.ts';
import { outriggerTargets } from './outrigger.ts';
import { BACKEND_PORT, peerTargets, startBackend } from './peers.ts';
import { CPUS, dir, have, launch, PIN, waitPort } from './procs.ts';
import { lagLine, mainTable, ratioTable, workloadTable } from './report.ts';
import { WORKLOADS } from './workloads.ts';

const { values: a } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '2' },
    only: { type: 'string' },
    rate: { type: 'string', default: '1000' },
    'closed-s': { type: 'string' },
    'fixed-s': { type: 'string' },
    workloads: { type: 'string', default: WORKLOADS.map((w) => w.name).join(',') },
    'fixed-only': { type: 'boolean', default: false },
    'closed-only': { type: 'boolean', default: false },
    'semi-space': { type: 'string' },
    pin: { type: 'boolean', default: false },
    ts: { type: 'boolean', default: false },
    json: { type: 'string' },
    baseline: { type: 'string' },
  },
});

const seconds = (v: string | undefined, quick: number, full: number): number =>
  Math.min(60, Math.max(1, Number(v ?? (a.quick ? quick : full)))) * 1000;
const workloads = WORKLOADS.filter((w) => a.workloads.split(',').includes(w.name));
const options: MeasureOptions = {
  warmMs: a.quick ? 1_000 : 2_000,
  closedMs: seconds(a['closed-s'], 3, 8),
  fixedMs: seconds(a['fixed-s'], 4, 10),
  rate: Number(a.rate),
  connections: 50,
  workloads: a['fixed-only'] ? [] : workloads,
  fixed: !a['closed-only'],
};
const ROUNDS = Math.max(1, Number(a.rounds));

async function main(): Promise<void> {
  if (PIN) spawnSync('taskset', ['-cp', '0', String(process.pid)], { stdio: 'ignore' });
  if (!have('nginx')) throw new Error('nginx is needed as the backend: apt-get install nginx-light');
  startBackend();
  await waitPort(BACKEND_PORT);
  // --ts runs the TypeScript sources (type stripping adds ~18 MB RSS per Node process).
  const build = a.ts ? sourcesBuild() : compiledBuild();
  const targets = [
    ...peerTargets(build),
    ...(await outriggerTargets({
      dir,
      backendPort: BACKEND_PORT,
      launch,
      main: build.main,
      ...(a['semi-space'] ? { semiSpaces: a['semi-space'].split(',') } : {}),
    })),
    // --baseline REF: the same Outrigger rows built from another git ref, in the same run.
    ...(a.baseline
      ? await outriggerTargets({
          dir,
          backendPort: BACKEND_PORT,
          launch,
          main: refBuild(a.baseline),
          label: ` (${a.baseline})`,
        })
      : []),
    ...gatewayTargets({ dir, backendPort: BACKEND_PORT, launch, main: build.main }),
  ];
  const only = a.only?.split(',');
  const chosen = targets.filter((t) => !only || only.includes(t.name));
  const rows = await rounds(chosen, ROUNDS, options);
  const env = `Node ${process.version}, ${CPUS} CPUs, ${spawnSync(
    'sh',
    ['-c', "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
    { encoding: 'utf8' },
  ).stdout.trim()}; nginx ${spawnSync('nginx', ['-v'], { encoding: 'utf8' }).stderr.trim().split('/')[1] ?? '?'}; load average at the end ${spawnSync('cat', ['/proc/loadavg'], { encoding: 'utf8' }).stdout.split(' ').slice(0, 3).join(' ')}; closed loop ${options.closedMs / 1000} s per workload, 50 connections; fixed rate ${options.rate} rps for ${options.fixedMs / 1000} s over 32 connections; ${PIN ? 'proxy pinned to CPU 1, generators and backend to CPU 0' : 'no CPU pinning'}; ${ROUNDS} rounds, order alternating; means shown`;
  const out = [env, '', mainTable(rows, options.rate), '', lagLine(rows)];
  if (workloads.length > 1 && options.workloads.length > 0) out.push('', workloadTable(rows));
  if (options.workloads.length > 0) out.push('', ratioTable(rows));
  for (const r of rows) if (r.note) out.push(`- ${r.name}: ${r.note}`);
  process.stdout.write(`${out.join('\n')}\n`);
  if (a.json) writeFileSync(a.json, JSON.stringify({ env, options, rows }, null, 2));
}

if (!existsSync('/proc/self/stat')) throw new Error('the benchmark reads /proc: Linux only');
await main();
process.exit(0);
