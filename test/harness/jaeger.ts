// A real Jaeger v2 (built from its Go module by scripts/test-cluster) on loopback-only, free ports,
// with in-memory storage, and a small client for its query API. Stopped when the test ends, pass
// or fail, and on process exit.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { requireTool, testBinaries } from './tools.ts';

export interface JaegerSpan {
  traceId: string;
  spanId: string;
  /** From the CHILD_OF reference; undefined for a root span. */
  parentSpanId?: string;
  name: string;
  service: string;
  kind?: string;
  tags: Record<string, unknown>;
  resource: Record<string, unknown>;
  events: Record<string, unknown>[];
}

export interface Jaeger {
  /** OTLP/HTTP base URL, e.g. http://127.0.0.1:43181 (the exporter appends /v1/traces). */
  otlpUrl: string;
  queryUrl: string;
  logFile: string;
  services(): Promise<string[]>;
  /** The spans of one trace, [] while Jaeger does not have it. */
  trace(traceId: string): Promise<JaegerSpan[]>;
  /** Polls until the trace has at least `spans` spans, or fails after timeoutMs with what it saw. */
  waitForTrace(traceId: string, spans: number, timeoutMs?: number): Promise<JaegerSpan[]>;
  /** Trace ids Jaeger holds for a service (most recent first, up to limit). */
  traceIds(service: string, limit?: number): Promise<string[]>;
  stop(): Promise<void>;
  /** Starts again on the same ports, with an empty store. */
  start(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export function jaegerBinary(): string | undefined {
  const bin = testBinaries().jaeger;
  return bin && existsSync(bin) ? bin : undefined;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function config(p: {
  otlpHttp: number;
  otlpGrpc: number;
  queryHttp: number;
  queryGrpc: number;
  metrics: number;
}): string {
  // Keys from Jaeger's all-in-one.yaml; every listener on 127.0.0.1.
  return `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: basic
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: ${p.metrics}
extensions:
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: mem
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:${p.queryHttp}
    grpc:
      endpoint: 127.0.0.1:${p.queryGrpc}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${p.otlpGrpc}
      http:
        endpoint: 127.0.0.1:${p.otlpHttp}
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`;
}

/**
 * Starts Jaeger for a test. Returns undefined when the test was skipped because the binary is not
 * built (never under CI=true: there the test fails).
 */
export async function startJaeger(t?: TestContext): Promise<Jaeger | undefined> {
  const bin = jaegerBinary();
  if (t && !requireTool(t, bin !== undefined, 'Jaeger', "run 'scripts/test-cluster build jaeger'"))
    return undefined;
  if (!bin) throw new Error("Jaeger binary missing: run 'scripts/test-cluster build jaeger'");
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-jaeger-'));
  const ports = {
    otlpHttp: await freePort(),
    otlpGrpc: await freePort(),
    queryHttp: await freePort(),
    queryGrpc: await freePort(),
    metrics: await freePort(),
  };
  const configFile = path.join(dir, 'jaeger.yaml');
  writeFileSync(configFile, config(ports));
  const logFile = path.join(dir, 'jaeger.log');
  const queryUrl = `http://127.0.0.1:${ports.queryHttp}`;
  let child: ChildProcess | undefined;

  const start = async (): Promise<void> => {
    const out = openSync(logFile, 'a');
    const c = spawn(bin, ['--config', configFile], { stdio: ['ignore', out, out] });
    child = c;
    live.add(c);
    c.once('exit', () => live.delete(c));
    await waitReady(queryUrl, c, logFile);
  };
  const stop = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise<void>((r) => c.once('exit', () => r()));
    c.kill('SIGTERM');
    const timer = setTimeout(() => c.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };

  await start();
  const jaeger: Jaeger = {
    otlpUrl: `http://127.0.0.1:${ports.otlpHttp}`,
    queryUrl,
    logFile,
    services: async () =>
      ((await getJson(`${queryUrl}/api/services`)) as { data: string[] | null }).data ?? [],
    trace: (id) => getTrace(queryUrl, id),
    async waitForTrace(id, spans, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      let seen: JaegerSpan[] = [];
      while (Date.now() < deadline) {
        seen = await getTrace(queryUrl, id);
        if (seen.length >= spans) return seen;
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error(
        `trace ${id}: ${seen.length} of ${spans} spans after ${timeoutMs} ms: ${JSON.stringify(seen)}`,
      );
    },
    async traceIds(service, limit = 100) {
      const u = `${queryUrl}/api/traces?service=${encodeURIComponent(service)}&limit=${limit}&lookback=1h`;
      const body = (await getJson(u)) as { data: { traceID: string }[] | null };
      return (body.data ?? []).map((d) => d.traceID);
    },
    stop,
    start,
  };
  t?.after(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return jaeger;
}

async function waitReady(queryUrl: string, child: ChildProcess, logFile: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`jaeger exited ${child.exitCode}:\n${tail(logFile)}`);
    try {
      const res = await fetch(`${queryUrl}/api/services`);
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`jaeger not ready after 30 s:\n${tail(logFile)}`);
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-30).join('\n');
  } catch {
    return '(no log)';
  }
}

async function getJson(url: string): Promise<unknown> {
  const res = await fetch(url);
  const body = await res.text();
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${body.slice(0, 300)}`);
  return JSON.parse(body) as unknown;
}

interface RawKV {
  key: string;
  value: unknown;
}
interface RawTrace {
  spans: {
    traceID: string;
    spanID: string;
    operationName: string;
    references?: { refType: string; spanID: string }[];
    tags?: RawKV[];
    logs?: { fields: RawKV[] }[];
    processID: string;
  }[];
  processes: Record<string, { serviceName: string; tags?: RawKV[] }>;
}

const kv = (list: RawKV[] = []): Record<string, unknown> =>
  Object.fromEntries(list.map((t) => [t.key, t.value]));

async function getTrace(queryUrl: string, id: string): Promise<JaegerSpan[]> {
  const res = await fetch(`${queryUrl}/api/traces/${id}`);
  const body = await res.text();
  if (res.status === 404) return [];
  if (!res.ok) throw new Error(`GET trace ${id}: ${res.status} ${body.slice(0, 300)}`);
  const data = (JSON.parse(body) as { data: RawTrace[] | null }).data ?? [];
  return data.flatMap((tr) =>
    tr.spans.map((s) => {
      const tags = kv(s.tags);
      const proc = tr.processes[s.processID];
      return {
        traceId: s.traceID,
        spanId: s.spanID,
        parentSpanId: s.references?.find((r) => r.refType === 'CHILD_OF')?.spanID,
        name: s.operationName,
        service: proc?.serviceName ?? '',
        kind: typeof tags['span.kind'] === 'string' ? tags['span.kind'] : undefined,
        tags,
        resource: kv(proc?.tags),
        events: (s.logs ?? []).map((l) => kv(l.fields)),
      };
    }),
  );
}
