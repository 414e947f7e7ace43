// Tracing overhead in one run: throughput and p99 latency through one sidecar hop (the real data
// path: egress listener, routing, balancing, the upstream client) with tracing disabled, and with sampling
// 0, 0.01 and 1.0, as ratios to "disabled". Loopback only; every run is
// bounded by wrk's duration.
//
//   node scripts/bench/tracing-overhead.ts [--duration 5] [--rounds 3] [--connections 32]
//        [--warmup 1] [--rate R]
//
// --rate R: a fixed rate (R requests/s from an in-process generator) instead of wrk's closed loop.
// At saturation a slower mode batches more requests per read and write, so its CPU per request is
// not comparable; below saturation every mode does the same syscalls per request. --warmup S: the
// SDK loads at the first sampled span and exports 2 s later; 5 s or more measures steady state.
//
// Spans go to a real Jaeger when scripts/test-cluster has built it, else to an OTLP sink that
// accepts and discards (the script says which). Modes are interleaved round by round so drift
// (thermal, other load) hits them all alike; the median round per mode is reported.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { jaegerBinary, startJaeger } from '../../test/harness/jaeger.ts';
import { serviceYaml } from '../../test/harness/tracing-relay.ts';
import { fixedRate } from './loadgen.ts';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '32' },
    warmup: { type: 'string', default: '1' },
    rate: { type: 'string' },
  },
});
const duration = Math.min(60, Math.max(1, Number(values.duration)));
const rounds = Math.min(10, Math.max(1, Number(values.rounds)));
const connections = Math.min(256, Math.max(1, Number(values.connections)));
const warmup = Math.min(60, Math.max(1, Number(values.warmup)));
const rate = values.rate === undefined ? undefined : Math.min(20_000, Math.max(1, Number(values.rate)));
const modes = ['disabled', '0', '0.01', '1'] as const;

if (spawnSync('wrk', ['--version']).error) throw new Error('wrk is required (apt-get install wrk)');

const backend = http.createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
  res.end('ok');
});
backend.keepAliveTimeout = 60_000;
await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
const backendPort = (backend.address() as AddressInfo).port;
const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-bench-tracing-'));
const servicesFile = path.join(dir, 'services.yaml');
writeFileSync(servicesFile, serviceYaml('backend', 'bench', backendPort, '10.96.0.90'));

const collector = await startCollector();
process.stdout.write(`collector: ${collector.kind} at ${collector.url}\n`);

interface Sample {
  /** Sidecar CPU time (user + system, export included) per request, in microseconds. */
  cpuPerRequest: number;
  rps: number;
  p50: number;
  p99: number;
  dropped: number;
  exported: number;
}
const samples = new Map<string, Sample[]>(modes.map((m) => [m, []]));
try {
  for (let round = 0; round < rounds; round++) {
    for (const mode of modes) {
      const s = await measure(mode);
      samples.get(mode)?.push(s);
      process.stdout.write(
        `round ${round + 1} ${mode.padEnd(8)} ${s.rps.toFixed(0).padStart(7)} req/s  p50 ${s.p50.toFixed(2)} ms  p99 ${s.p99.toFixed(2)} ms  cpu ${s.cpuPerRequest.toFixed(1)} µs/req  spans exported ${s.exported} dropped ${s.dropped}\n`,
      );
    }
  }
  report();
} finally {
  backend.closeAllConnections();
  backend.close();
  await collector.stop();
  rmSync(dir, { recursive: true, force: true });
}

function report(): void {
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const med = (mode: string, f: (s: Sample) => number): number => median((samples.get(mode) ?? []).map(f));
  const baseRps = med('disabled', (s) => s.rps);
  const baseP99 = med('disabled', (s) => s.p99);
  const baseCpu = med('disabled', (s) => s.cpuPerRequest);
  process.stdout.write(
    `\nmedian of ${rounds} rounds, ${duration} s each after ${warmup} s of warm-up, ${connections} connections, ${rate === undefined ? 'wrk 1 thread' : `${rate} requests/s`}, load average ${os.loadavg()[0]?.toFixed(1)} on ${os.cpus().length} CPUs\n` +
      '| tracing | req/s | p99 ms | sidecar CPU µs/req | throughput vs disabled | p99 vs disabled | CPU/req vs disabled | spans dropped |\n' +
      '|---|---|---|---|---|---|---|---|\n',
  );
  for (const mode of modes) {
    const rps = med(mode, (s) => s.rps);
    const p99 = med(mode, (s) => s.p99);
    const cpu = med(mode, (s) => s.cpuPerRequest);
    const label = mode === 'disabled' ? 'disabled' : `sampling ${mode}`;
    const dropped = (samples.get(mode) ?? []).reduce((a, s) => a + s.dropped, 0);
    process.stdout.write(
      `| ${label} | ${rps.toFixed(0)} | ${p99.toFixed(2)} | ${cpu.toFixed(1)} | ${(rps / baseRps).toFixed(3)} | ${(p99 / baseP99).toFixed(3)} | ${(cpu / baseCpu).toFixed(3)} | ${dropped} |\n`,
    );
  }
}

async function measure(mode: string): Promise<Sample> {
  const child = spawn(
    process.execPath,
    [new URL('./tracing-sidecar-child.ts', import.meta.url).pathname, mode, servicesFile, collector.url],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000); // a sidecar that never starts
  const first = await lines.next();
  clearTimeout(killer);
  if (first.done) throw new Error(`sidecar (${mode}) did not start`);
  const { port } = JSON.parse(String(first.value)) as { port: number };
  const url = `http://127.0.0.1:${port}/bench`;
  await wrk(url, warmup); // warm-up: JIT, keep-alive sockets, the SDK's first export
  child.kill('SIGUSR2');
  const result = rate === undefined ? await wrk(url, duration) : await atRate(port, rate);
  const stats = await stopChild(child, lines);
  return {
    rps: result.rps,
    p50: result.p50,
    p99: result.p99,
    cpuPerRequest: stats.cpuMicros / result.requests,
    dropped: stats.dropped,
    exported: stats.exported,
  };
}

async function stopChild(
  child: ChildProcess,
  lines: AsyncIterator<string>,
): Promise<{ dropped: number; exported: number; cpuMicros: number }> {
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const next = await lines.next();
  clearTimeout(timer);
  if (next.done) return { dropped: NaN, exported: NaN, cpuMicros: NaN };
  const out = JSON.parse(String(next.value)) as {
    stats: { dropped: number; exported: number };
    cpuMicros: number;
  };
  return { ...out.stats, cpuMicros: out.cpuMicros };
}

function wrk(
  url: string,
  seconds: number,
): Promise<{ rps: number; p50: number; p99: number; requests: number }> {
  return new Promise((resolve, reject) => {
    const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--latency', '-H', 'Host: backend.bench', url];
    const p = spawn('wrk', args, {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.once('error', reject);
    p.once('exit', (code) => {
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)?.[1];
      const requests = /(\d+) requests in/.exec(out)?.[1];
      const p50 = /\s50%\s+([\d.]+)(us|ms|s)/.exec(out);
      const p99 = /\s99%\s+([\d.]+)(us|ms|s)/.exec(out);
      const errors = /Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)/.exec(out);
      if (code !== 0 || !rps || !p50 || !p99 || !requests)
        return reject(new Error(`wrk failed (${code}):\n${out}`));
      if (errors) return reject(new Error(`wrk saw failed requests:\n${out}`));
      resolve({ rps: Number(rps), p50: ms(p50), p99: ms(p99), requests: Number(requests) });
    });
  });
}

async function atRate(
  port: number,
  rps: number,
): Promise<{ rps: number; p50: number; p99: number; requests: number }> {
  const r = await fixedRate(
    { host: '127.0.0.1', port, authority: 'backend.bench', path: '/bench' },
    { rate: rps, durationMs: duration * 1000, connections },
  );
  if (r.errors > 0) throw new Error(`${r.errors} requests failed at ${rps} rps`);
  return { rps: r.achievedRps, p50: r.corrected.p50, p99: r.corrected.p99, requests: r.ok };
}

function ms(m: RegExpExecArray): number {
  const v = Number(m[1]);
  return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
}

async function startCollector(): Promise<{ kind: string; url: string; stop(): Promise<void> }> {
  if (jaegerBinary()) {
    const j = await startJaeger();
    if (j) return { kind: 'Jaeger v2 (in-memory)', url: j.otlpUrl, stop: () => j.stop() };
  }
  // An OTLP/HTTP sink: reads the body, answers an empty ExportTraceServiceResponse.
  const sink = http.createServer((req, res) => {
    req.resume();
    req.once('end', () =>
      res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' }).end(),
    );
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  return {
    kind: 'OTLP sink (Jaeger not built)',
    url,
    stop: () => new Promise<void>((r) => sink.close(() => r())),
  };
}
