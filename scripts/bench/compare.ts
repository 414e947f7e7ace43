// Compares two benchmark runs written with `run.ts --json FILE`: for every row in both, closed-loop
// rps and CPU per request of each workload, and CPU per 1,000 rps at the fixed rate, B against A.
//   node scripts/bench/compare.ts A.json B.json
import { readFileSync } from 'node:fs';
import type { Row } from './measure.ts';
import { f } from './report.ts';

const [a, b] = process.argv.slice(2).map((file) => {
  const run = JSON.parse(readFileSync(file, 'utf8')) as { rows: Row[] };
  return new Map(run.rows.map((r) => [r.name, r]));
});
if (!a || !b) throw new Error('usage: node scripts/bench/compare.ts A.json B.json');

const lines = ['| target | workload | rps A → B (× ) | CPU µs/req A → B (×) |', '|---|---|---|---|'];
for (const [name, rb] of b) {
  const ra = a.get(name);
  if (!ra) continue;
  for (const [w, cb] of Object.entries(rb.closed)) {
    const ca = ra.closed[w];
    if (!ca) continue;
    lines.push(
      `| ${name} | ${w} | ${f(ca.rps, 0)} → ${f(cb.rps, 0)} (${f(cb.rps / ca.rps)}) | ${f(ca.cpuUsPerReq, 0)} → ${f(cb.cpuUsPerReq, 0)} (${f(cb.cpuUsPerReq / ca.cpuUsPerReq)}) |`,
    );
  }
  if (Number.isFinite(ra.cpuPer1k) && Number.isFinite(rb.cpuPer1k))
    lines.push(
      `| ${name} | fixed rate, cores per 1k rps | | ${f(ra.cpuPer1k, 3)} → ${f(rb.cpuPer1k, 3)} (${f(rb.cpuPer1k / ra.cpuPer1k)}) |`,
    );
}
process.stdout.write(`${lines.join('\n')}\n`);
