// V8's sampling heap profiler through the inspector, with collected objects kept in the samples
// (garbage is what the young-generation GC pays for): bytes allocated per request by allocating
// frame. Used by alloc-profile.ts (HTTP/1.1 under wrk) and grpc.ts --alloc (HTTP/2 under h2load).

interface SampledNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SampledNode[];
}

/** A minimal inspector-protocol client: one WebSocket, calls answered by id. */
export async function inspector(
  port: number,
): Promise<(method: string, params?: object) => Promise<unknown>> {
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

export function bySite(root: SampledNode): Map<string, number> {
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

export type InspectorCall = Awaited<ReturnType<typeof inspector>>;

/**
 * Allocation sites sampled while `load` runs (every 512 bytes on average). With `survivors`, only
 * objects that outlived a young-generation collection: what each scavenge has to copy.
 */
export async function sampleAllocations(
  call: InspectorCall,
  load: () => void | Promise<void>,
  survivors = false,
): Promise<Map<string, number>> {
  await call('HeapProfiler.enable');
  await call('HeapProfiler.startSampling', {
    samplingInterval: 512,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: !survivors,
  });
  await load();
  const { profile } = (await call('HeapProfiler.stopSampling')) as { profile: { head: SampledNode } };
  return bySite(profile.head);
}

/** The sites as a Markdown table of bytes per request; `own` drops Node's and undici's frames. */
export function allocationTable(
  title: string,
  sites: Map<string, number>,
  requests: number,
  top: number,
  own: boolean,
  survivors = false,
): string {
  const what = survivors ? 'outliving a scavenge' : 'allocated';
  const total = [...sites.values()].reduce((x, y) => x + y, 0);
  const shown = [...sites]
    .filter(([k]) => !own || !/ (node:|undici\/)|^\(|:0$/.test(k))
    .sort((x, y) => y[1] - x[1])
    .slice(0, top);
  return [
    `${title}, ${Math.round(total / requests)} bytes ${what} per request (sampled)`,
    '',
    '| bytes / request | frame |',
    '|---|---|',
    ...shown.map(([k, v]) => `| ${Math.round(v / requests)} | \`${k}\` |`),
    '',
  ].join('\n');
}
