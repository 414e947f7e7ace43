// Where one sidecar's allocations go under load (garbage is what the young-generation GC pays
// for): V8's sampling heap profiler, through the inspector, with collected objects kept in the
// samples, while wrk drives the compiled `outrigger proxy` (or a bare Node pipe, for the floor).
// Prints bytes allocated per request by allocating frame.
//   node scripts/bench/alloc-profile.ts [--hop egress|ingress] [--bare undici|raw] [--seconds 4]
//        [--top 30] [--own] [--sampling RATIO] [--survivors]   (--own: only frames outside Node's
//        internals and undici; --survivors: only what outlived a scavenge)
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PORTS, startSidecar, startStage, untilAnswers } from './lone-sidecar.ts';
import { BACKEND_PORT } from './peers.ts';
import { benchPort, launch } from './procs.ts';
import { WORKLOADS, wrk } from './workloads.ts';
import { allocationTable, inspector, sampleAllocations } from './heap-sampling.ts';

const { values: a } = parseArgs({
  options: {
    hop: { type: 'string', default: 'egress' },
    bare: { type: 'string' },
    seconds: { type: 'string', default: '4' },
    top: { type: 'string', default: '30' },
    own: { type: 'boolean', default: false },
    sampling: { type: 'string' },
    survivors: { type: 'boolean', default: false },
  },
});
const INSPECTOR = benchPort(117);
const ms = Math.min(30, Math.max(1, Number(a.seconds))) * 1000;

await startStage();
const inspect = `--inspect=127.0.0.1:${INSPECTOR}`;
const port = a.hop === 'ingress' && !a.bare ? PORTS.ingress : PORTS.egress;
const authority = a.hop === 'ingress' ? 'app' : 'one-hop';
let child: ChildProcess;
if (a.bare) {
  const pipe = path.resolve('scripts/bench/node-proxies.ts');
  child = launch(process.execPath, [inspect, pipe, a.bare, String(port), String(BACKEND_PORT)]);
  await untilAnswers(port, '/');
} else child = await startSidecar({ nodeFlags: [inspect], ...(a.sampling ? { sampling: a.sampling } : {}) });
const call = await inspector(INSPECTOR);
wrk(port, authority, 1_500, 50, WORKLOADS[0]); // warm-up: optimised code, pools filled
let r: ReturnType<typeof wrk>;
const sites = await sampleAllocations(
  call,
  () => {
    r = wrk(port, authority, ms, 50, WORKLOADS[0]);
  },
  a.survivors,
);
if (!r) throw new Error('wrk is needed: apt-get install wrk');
child.kill('SIGKILL');
process.stdout.write(
  allocationTable(
    `${a.bare ? `bare ${a.bare} pipe` : `outrigger ${a.hop}`}: ${r.requests} requests`,
    sites,
    r.requests,
    Number(a.top),
    a.own,
    a.survivors,
  ),
);
process.exit(0);
