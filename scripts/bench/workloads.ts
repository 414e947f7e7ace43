// The request shapes of the benchmark and the closed-loop driver (wrk) for each.
//   small     GET, 12-byte response body (the backend's hello world)
//   1k        GET, 1 KiB response body (Istio's standard benchmark load is 1 KiB)
//   post4k    POST with a 4 KiB request body (Content-Length), 12-byte response
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { dir, have, pinned } from './procs.ts';

export interface Workload {
  name: 'small' | '1k' | 'post4k';
  label: string;
  path: string;
  method: 'GET' | 'POST';
  bodyBytes: number;
}

export const WORKLOADS: readonly Workload[] = [
  { name: 'small', label: 'GET, 12 B response', path: '/', method: 'GET', bodyBytes: 0 },
  { name: '1k', label: 'GET, 1 KiB response', path: '/1k', method: 'GET', bodyBytes: 0 },
  { name: 'post4k', label: 'POST 4 KiB body', path: '/', method: 'POST', bodyBytes: 4096 },
];

/** The 1 KiB response the backend serves on /1k. */
export const ONE_KIB = `${'x'.repeat(1023)}\n`;

export interface ClosedResult {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  errors: number;
}

function luaScript(w: Workload): string | undefined {
  if (w.method === 'GET') return undefined;
  const file = path.join(dir, `${w.name}.lua`);
  writeFileSync(
    file,
    `wrk.method = "${w.method}"\nwrk.body = string.rep("b", ${w.bodyBytes})\nwrk.headers["Content-Type"] = "application/octet-stream"\n`,
  );
  return file;
}

/** The wrk command line of a -t1 -cN closed loop against one target. */
export function wrkArgs(
  port: number,
  authority: string,
  ms: number,
  connections: number,
  w: Workload,
): string[] {
  const script = luaScript(w);
  return [
    '-t1',
    `-c${connections}`,
    `-d${Math.round(ms / 1000)}s`,
    '--latency',
    ...(script ? ['-s', script] : []),
    '-H',
    `Host: ${authority}`,
    `http://127.0.0.1:${port}${w.path}`,
  ];
}

/** Throughput, latency and errors from wrk's report. */
export function parseWrk(stdout: string): ClosedResult {
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]);
  const requests = Number(/(\d+) requests in/.exec(stdout)?.[1]);
  const lat = (q: string): number => {
    const m = new RegExp(`\\s${q}%\\s+([\\d.]+)(us|ms|s)`).exec(stdout);
    if (!m) return NaN;
    const v = Number(m[1]);
    return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
  };
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(stdout)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
  const errors = non2xx + (sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0);
  return { rps, p50: lat('50'), p99: lat('99'), requests, errors };
}

/** wrk -t1 -cN closed loop against one target; undefined without wrk. */
export function wrk(
  port: number,
  authority: string,
  ms: number,
  connections: number,
  w: Workload = WORKLOADS[0]!,
): ClosedResult | undefined {
  if (!have('wrk')) return undefined;
  const r = spawnSync(...pinned('load', 'wrk', wrkArgs(port, authority, ms, connections, w)), {
    encoding: 'utf8',
    timeout: ms + 30_000,
  });
  const result = parseWrk(r.stdout);
  if (result.errors > 0) process.stderr.write(`bench: wrk on ${port} ${w.name}: ${r.stdout}\n`);
  return result;
}
