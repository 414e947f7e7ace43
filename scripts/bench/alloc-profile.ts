// Where one sidecar's allocations go under load (garbage is what the young-generation GC pays
// for): V8's sampling heap profiler, through the inspector, with collected objects kept in the
// samples, while wrk drives the compiled `outrigger proxy` (or a bare Node pipe, for the floor).
// Prints bytes allocated per request by allocating frame.
//   node scripts/bench/alloc-profile.ts [--hop egress|ingress] [--bare undici|raw] [--seconds 4]
//        [--top 30] [--own] [--sampling RATIO]   (--own: only frames outside Node's internals and undici)
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PORTS, startSidecar, startStage, untilAnswers } from './lone-sidecar.ts';
import { BACKEND_PORT } from './peers.ts';
import { benchPort, launch } from './procs.ts';
import { WORKLOADS, wrk } from './workloads.ts';

const { values: a } = parseArgs({
  options: {
    hop: { type: 'string', default: 'egress' },
    bare: { type: 'string' },
    seconds: { type: 'string', default: '4' },
    top: { type: 'string', default: '30' },
    own: { type: 'boolean', default: false },
    sampling: { type: 'string' },
  },
});
const INSPECTOR = benchPort(117);
const ms = Math.min(30, Math.max(1, Number(a.seconds))) * 1000;

interface SampledNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SampledNode[];
}

/** A minimal inspector-protocol client: one WebSocket, calls answered by id. */
async function inspector(port: number): Promise<(method: string, params?: object) => Promise<unknown>> {
  const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
    webSocketDebuggerUrl: string;
  }[];
  const ws = new WebSocket(list[0]!.webSocketDebuggerUrl);
  await new Promise((r) => ws.addEventListener('open', r, { once: true }));
  const pending = new Map<number, (v: unknown) => void>();
  ws.addEventListener('message', (e) => {
    const m = JSON.parse(String(e.data)) as { id?: number; result?: unknown };
    if (m.id !== undefined) pending.get(m.id)?.(m.result);
  });
  let id = 0;
  return (method, params = {}) =>
    new Promise((resolve) => {
      pending.set(++id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
}

function bySite(root: SampledNode): Map<string, number> {
  const sites = new Map<string, number>();
  const walk = (n: SampledNode): void => {
    const { functionName, url, lineNumber } = n.callFrame;
    const file = url.replace(/^.*\/(node_modules|dist)\//, '').replace(/^file:\/\//, '');
    const key = `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
    if (n.selfSize > 0) sites.set(key, (sites.get(key) ?? 0) + n.selfSize);
    n.children.forEach(walk);
  };
  walk(root);
  return sites;
}

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
await call('HeapProfiler.enable');
wrk(port, authority, 1_500, 50, WORKLOADS[0]); // warm-up: optimised code, pools filled
await call('HeapProfiler.startSampling', {
  samplingInterval: 512,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
});
const r = wrk(port, authority, ms, 50, WORKLOADS[0]);
if (!r) throw new Error('wrk is needed: apt-get install wrk');
const { profile } = (await call('HeapProfiler.stopSampling')) as { profile: { head: SampledNode } };
child.kill('SIGKILL');
const sites = bySite(profile.head);
const total = [...sites.values()].reduce((x, y) => x + y, 0);
const shown = [...sites]
  .filter(([k]) => !a.own || !/ (node:|undici\/)|^\(|:0$/.test(k))
  .sort((x, y) => y[1] - x[1])
  .slice(0, Number(a.top));
process.stdout.write(
  [
    `${a.bare ? `bare ${a.bare} pipe` : `outrigger ${a.hop}`}: ${r.requests} requests, ${Math.round(total / r.requests)} bytes allocated per request (sampled)`,
    '',
    '| bytes / request | frame |',
    '|---|---|',
    ...shown.map(([k, v]) => `| ${Math.round(v / r.requests)} | \`${k}\` |`),
    '',
  ].join('\n'),
);
process.exit(0);
