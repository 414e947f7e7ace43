// Markdown tables of a benchmark run, with ratios to the peers taken from the same run.
import type { Row } from './measure.ts';
import { WORKLOADS } from './workloads.ts';

export const f = (n: number | undefined, d = 2): string =>
  n !== undefined && Number.isFinite(n) ? n.toFixed(d) : '—';

const k = (n: number | undefined): string =>
  n !== undefined && Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—';

function rpsCell(r: Row): string {
  const first = Object.values(r.closed)[0];
  if (!first) return '—';
  return `${k(first.rps)} (${r.rounds.map((x) => (x / 1000).toFixed(1)).join(' / ')}k)`;
}

const firstClosed = (r: Row | undefined): Row['closed'][string] | undefined =>
  r ? Object.values(r.closed)[0] : undefined;

export function mainTable(rows: Row[], rate: number): string {
  const nginx = firstClosed(rows.find((r) => r.name === 'nginx'));
  const direct = rows.find((r) => r.name === 'direct');
  const lines = [
    `| target | closed-loop rps (rounds) | × nginx | CPU µs / request, closed | p50 / p99 closed (ms) | p50 / p99 at ${rate} rps, CO-corrected (ms) | added p99 vs direct (ms) | service p99 (ms) | errors | CPU cores per 1k rps | event-loop delay p99 / max (ms) | RSS start / idle / load (MB) |`,
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    const c = firstClosed(r);
    const added = direct?.fixed && r.fixed ? r.fixed.corrected.p99 - direct.fixed.corrected.p99 : NaN;
    const isDirect = r.name === 'direct';
    lines.push(
      `| ${r.name} | ${rpsCell(r)} | ${f(c && nginx ? c.rps / nginx.rps : NaN)} | ${f(c?.cpuUsPerReq, 0)} | ${f(c?.p50)} / ${f(c?.p99)} | ${f(r.fixed?.corrected.p50)} / ${f(r.fixed?.corrected.p99)} | ${isDirect ? '—' : f(added)} | ${f(r.fixed?.service.p99)} | ${(r.fixed?.errors ?? 0) + (c?.errors ?? 0)} | ${f(r.cpuPer1k, 3)} | ${r.eld ? `${f(r.eld.p99)} / ${f(r.eld.max)}` : '—'} | ${isDirect ? '—' : `${f(r.rssStart, 0)} / ${f(r.rssIdle, 0)} / ${f(r.rssLoad, 0)}`} |`,
    );
  }
  return lines.join('\n');
}

/** Closed-loop throughput and CPU per request for the body workloads. */
export function workloadTable(rows: Row[]): string {
  const names = WORKLOADS.map((w) => w.name).filter((n) => rows.some((r) => r.closed[n]));
  const nginx = rows.find((r) => r.name === 'nginx');
  const head = names.map(
    (n) => `${WORKLOADS.find((w) => w.name === n)?.label}: rps / × nginx / CPU µs per request`,
  );
  const lines = [`| target | ${head.join(' | ')} |`, `|---|${names.map(() => '---|').join('')}`];
  for (const r of rows) {
    const cells = names.map((n) => {
      const c = r.closed[n];
      const base = nginx?.closed[n];
      return c ? `${k(c.rps)} / ${f(base ? c.rps / base.rps : NaN)} / ${f(c.cpuUsPerReq, 0)}` : '—';
    });
    lines.push(`| ${r.name} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

/** Each row against each floor: throughput ratio and CPU-per-request ratio, first workload. */
export function ratioTable(rows: Row[], floors = ['nginx', 'skipper', 'node raw', 'node undici']): string {
  const present = floors.filter((n) => rows.some((r) => r.name === n && firstClosed(r)));
  const lines = [
    `| target | ${present.map((n) => `rps × ${n}`).join(' | ')} | ${present.map((n) => `CPU/req × ${n}`).join(' | ')} |`,
    `|---|${present.map(() => '---|---|').join('')}`,
  ];
  for (const r of rows) {
    const c = firstClosed(r);
    if (!c || r.name === 'direct') continue;
    const base = present.map((n) => firstClosed(rows.find((x) => x.name === n))!);
    lines.push(
      `| ${r.name} | ${base.map((b) => f(c.rps / b.rps)).join(' | ')} | ${base.map((b) => f(c.cpuUsPerReq / b.cpuUsPerReq)).join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

/**
 * The generator's own lateness, seen against the direct target (which keeps up): timer granularity
 * and scheduling. Against a saturated target the same figure is the backlog, i.e. the correction.
 */
export function lagLine(rows: Row[]): string {
  const l = rows.find((r) => r.name === 'direct')?.fixed?.lag;
  if (!l) return '';
  return `generator lateness against the direct target (send time after due time): p50 ${f(l.p50)} ms, p99 ${f(l.p99)} ms`;
}
