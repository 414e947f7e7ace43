// The upstream-client comparison in one run: four node:http proxies that differ only in the
// client (http-proxy web(), http.request, undici Pool dispatch() into the ServerResponse, undici
// stream()), closed loop against the same nginx backend, CPU per request from /proc.
//   node scripts/bench/clients.ts [--rounds 3] [--closed-s 10] [--workloads small,post4k] [--json FILE]
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { compiledBuild } from './build.ts';
import { rounds } from './measure.ts';
import { BACKEND_PORT, clientTargets, startBackend } from './peers.ts';
import { waitPort } from './procs.ts';
import { ratioTable, workloadTable } from './report.ts';
import { WORKLOADS } from './workloads.ts';

const { values: a } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    'closed-s': { type: 'string', default: '10' },
    workloads: { type: 'string', default: 'small,post4k' },
    json: { type: 'string' },
  },
});
startBackend();
await waitPort(BACKEND_PORT);
const rows = await rounds(clientTargets(compiledBuild()), Math.max(1, Number(a.rounds)), {
  warmMs: 2_000,
  closedMs: Math.min(60, Math.max(1, Number(a['closed-s']))) * 1000,
  fixedMs: 0,
  rate: 0,
  connections: 50,
  workloads: WORKLOADS.filter((w) => a.workloads.split(',').includes(w.name)),
  fixed: false,
});
const perRound = rows.map((r) => `- ${r.name}: rounds ${r.rounds.map((x) => Math.round(x)).join(' / ')} rps`);
process.stdout.write(
  `${workloadTable(rows)}\n\n${ratioTable(rows, ['http-proxy', 'raw'])}\n\n${perRound.join('\n')}\n`,
);
if (a.json) writeFileSync(a.json, JSON.stringify({ rows }, null, 2));
process.exit(0);
