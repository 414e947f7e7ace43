// A V8 .cpuprofile summarised per request: the top frames by self time, and the time by area (Node
// internals, each package, Outrigger's own modules, GC). Used by profile.ts and grpc.ts --profile.
interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** An area of the code: a package, a Node built-in module, Outrigger's own directory, or V8. */
function area(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  if (url.startsWith('node:')) return url;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  const own = /\/(?:dist|src)\/(.+)\/[^/]+\.[jt]s$/.exec(url);
  return own ? `outrigger ${own[1]}` : url;
}

export function summarize(p: CpuProfile, requests: number, top: number): string {
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
  const frames = new Map<string, number>();
  const areas = new Map<string, number>();
  let total = 0;
  for (const n of p.nodes) {
    const us = self.get(n.id) ?? 0;
    if (n.callFrame.functionName === '(idle)') continue;
    total += us;
    const { functionName, url, lineNumber } = n.callFrame;
    const file = url
      ? `${url.replace(/^.*\/(node_modules|dist|src)\//, '').replace(/^file:\/\//, '')}:${lineNumber + 1}`
      : '';
    const key = `${functionName || '(anonymous)'} ${file}`.trim();
    frames.set(key, (frames.get(key) ?? 0) + us);
    const ar = area(url, functionName);
    areas.set(ar, (areas.get(ar) ?? 0) + us);
  }
  const per = (us: number): string => (us / requests).toFixed(1);
  const pct = (us: number): string => ((100 * us) / total).toFixed(1);
  const table = (
    head: string,
    label: string,
    rows: Map<string, number>,
    name: (k: string) => string,
  ): string[] => [
    `| ${head} | % | ${label} |`,
    '|---|---|---|',
    ...[...rows]
      .sort((x, y) => y[1] - x[1])
      .slice(0, top)
      .map(([k, us]) => `| ${per(us)} | ${pct(us)} | ${name(k)} |`),
  ];
  const lines = [
    `busy CPU sampled: ${(total / 1e6).toFixed(2)} s over ${requests} requests = ${per(total)} µs per request`,
    '',
    ...table('self µs / request', 'frame', frames, (k) => `\`${k}\``),
    '',
    ...table('µs / request', 'area', areas, (k) => k),
  ];
  return lines.join('\n');
}
