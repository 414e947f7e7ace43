// Memory of a process the way a cluster pays for it, from /proc/PID/smaps_rollup (RSS, PSS, USS =
// Private_Clean + Private_Dirty), and where its private bytes are, from /proc/PID/smaps: each
// mapping classed by what backs it (the node binary, other files, the main malloc arena, glibc's
// thread arenas, thread stacks, other anonymous memory: the V8 heap, large malloc blocks, wasm).
import { readFileSync } from 'node:fs';

export interface Mem {
  rss: number;
  pss: number;
  uss: number;
  anon: number;
}

const MB = 1024;

/** RSS, PSS, USS and anonymous memory in MB; NaN fields when the process is gone. */
export function memOf(pid: number): Mem {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  } catch {
    return { rss: NaN, pss: NaN, uss: NaN, anon: NaN };
  }
  const kb = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
  return {
    rss: kb('Rss') / MB,
    pss: kb('Pss') / MB,
    uss: (kb('Private_Clean') + kb('Private_Dirty')) / MB,
    anon: kb('Anonymous') / MB,
  };
}

interface Mapping {
  start: number;
  end: number;
  perms: string;
  path: string;
  /** Private_Clean + Private_Dirty, kB. */
  priv: number;
}

function mappings(pid: number): Mapping[] {
  const out: Mapping[] = [];
  let cur: Mapping | undefined;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      cur = {
        start: parseInt(head[1]!, 16),
        end: parseInt(head[2]!, 16),
        perms: head[3]!,
        path: head[4] ?? '',
        priv: 0,
      };
      out.push(cur);
      continue;
    }
    const f = /^Private_(?:Clean|Dirty):\s+(\d+) kB/.exec(line);
    if (f && cur) cur.priv += Number(f[1]);
  }
  return out;
}

/** glibc's per-thread malloc heaps are 64 MiB-aligned reservations of 64 MiB (HEAP_MAX_SIZE). */
const ARENA = 64 * 1024 * 1024;
/** V8 allocates its heap in 256 KiB pages. */
const V8_PAGE = 256 * 1024;

export type Breakdown = Record<string, number>;

function classOf(m: Mapping, prev: Mapping | undefined, next: Mapping | undefined): string {
  if (m.path === '[heap]') return 'malloc main arena ([heap])';
  if (m.path === '[stack]') return 'thread stacks';
  if (/\/node$/.test(m.path)) return 'node binary';
  if (m.path !== '') return 'other files and mappings';
  const size = m.end - m.start;
  if (m.perms.includes('x')) return 'V8 code range';
  if (m.perms === 'rw-p' && m.start % ARENA === 0 && size <= ARENA) {
    const tail = next && next.start === m.end && next.perms === '---p' ? next.end : m.end;
    if (tail - m.start === ARENA) return 'malloc thread arenas';
  }
  if (
    prev &&
    prev.end === m.start &&
    prev.perms === '---p' &&
    prev.end - prev.start <= 65536 &&
    size <= 8 * 1048576
  )
    return 'thread stacks';
  if (m.start % V8_PAGE === 0 && size % V8_PAGE === 0) return 'V8 heap pages';
  return 'other anonymous (large mallocs, wasm)';
}

/** Private MB by what backs it (classes from each mapping's address, size, neighbours and file). */
export function breakdown(pid: number): Breakdown {
  const out: Breakdown = {};
  const maps = mappings(pid);
  maps.forEach((m, i) => {
    if (m.priv === 0) return;
    const k = classOf(m, maps[i - 1], maps[i + 1]);
    out[k] = (out[k] ?? 0) + m.priv / MB;
  });
  return out;
}

/** prom-client's heap figures from a sidecar's /metrics (MB): V8 spaces committed, external. */
export function heapFromMetrics(body: string): Breakdown {
  const out: Breakdown = {};
  for (const m of body.matchAll(/^outrigger_nodejs_heap_space_size_total_bytes\{space="([^"]+)"\} (\S+)$/gm))
    out[`V8 ${m[1]}`] = Number(m[2]) / 1024 / 1024;
  for (const m of body.matchAll(/^outrigger_nodejs_heap_space_size_used_bytes\{space="([^"]+)"\} (\S+)$/gm))
    out[`V8 ${m[1]} used`] = Number(m[2]) / 1024 / 1024;
  const ext = /^outrigger_nodejs_external_memory_bytes (\S+)$/m.exec(body);
  if (ext) out['external (ArrayBuffers, buffers)'] = Number(ext[1]) / 1024 / 1024;
  return out;
}
