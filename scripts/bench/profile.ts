// Where one sidecar's CPU goes under load: runs the compiled `outrigger proxy` with V8's sampling
// profiler (--cpu-prof) behind wrk, then prints the top frames by self time (µs per request) and
// the time by area (Node internals, each package, Outrigger's own modules, GC).
//   node scripts/bench/profile.ts [--hop egress|ingress] [--seconds 10] [--connections 50]
//        [--workload small] [--sampling RATIO] [--top 30] [--keep DIR]     (--keep saves the .cpuprofile, e.g. for a flame graph)
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { summarize, type CpuProfile } from './cpuprofile.ts';
import { closedLoop } from './loadgen.ts';
import { PORTS, startSidecar, startStage } from './lone-sidecar.ts';
import { dir } from './procs.ts';
import { WORKLOADS, wrk } from './workloads.ts';

const { values: a } = parseArgs({
  options: {
    hop: { type: 'string', default: 'egress' },
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    workload: { type: 'string', default: 'small' },
    top: { type: 'string', default: '30' },
    keep: { type: 'string' },
    'semi-space': { type: 'string', default: '4' },
    sampling: { type: 'string' },
  },
});
const workload = WORKLOADS.find((w) => w.name === a.workload) ?? WORKLOADS[0]!;
const ms = Math.min(60, Math.max(2, Number(a.seconds))) * 1000;

await startStage();
const profDir = path.join(dir, 'prof');
mkdirSync(profDir);
const child = await startSidecar({
  nodeFlags: ['--cpu-prof', '--cpu-prof-dir', profDir],
  semiSpace: a['semi-space'],
  ...(a.sampling ? { sampling: a.sampling } : {}),
});
const port = a.hop === 'ingress' ? PORTS.ingress : PORTS.egress;
const authority = a.hop === 'ingress' ? 'app' : 'one-hop';
await closedLoop({ host: '127.0.0.1', port, authority }, { connections: 50, durationMs: 2_000 });
const r = wrk(port, authority, ms, Number(a.connections), workload);
if (!r) throw new Error('wrk is needed: apt-get install wrk');
child.kill('SIGTERM');
await new Promise((resolve) => child.once('exit', resolve));
const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
if (!file) throw new Error('no .cpuprofile written');
if (a.keep) {
  mkdirSync(a.keep, { recursive: true });
  copyFileSync(path.join(profDir, file), path.join(a.keep, `${a.hop}-${file}`));
}
const profile = JSON.parse(readFileSync(path.join(profDir, file), 'utf8')) as CpuProfile;
// The warm-up's requests are in the profile too (the profiler runs from start-up).
const requests = r.requests + Math.round(r.rps * 2);
process.stdout.write(
  `${a.hop}, ${workload.label}, wrk -c${a.connections} ${ms / 1000} s: ${Math.round(r.rps)} rps, ${r.errors} errors; load average ${spawnSync('cat', ['/proc/loadavg'], { encoding: 'utf8' }).stdout.trim()}\n\n${summarize(profile, requests, Number(a.top))}\n`,
);
process.exit(0);
