// Outrigger's own rows in the benchmark: one hop (egress only) and two hops (egress -> ingress of
// a second sidecar -> backend), started as `outrigger proxy` on the file source in explicit mode
// (routing by the Host header; transparent capture needs a network namespace, and the data path
// after the accept is the same). Tracing stays at its default 1% sampling with a loopback OTLP sink,
// so the numbers include everything the sidecar does per request.
import type { ChildProcess } from 'node:child_process';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { httpGet } from '../../test/harness/http-get.ts';
import { serviceYaml } from '../../test/harness/tracing-relay.ts';
import type { BenchTarget } from './peers.ts';
import { benchPort } from './procs.ts';

export interface OutriggerEnv {
  dir: string;
  backendPort: number;
  /** The outrigger CLI entry point (compiled or source). */
  main: string;
  launch(cmd: string, argv: string[], opts?: { env?: NodeJS.ProcessEnv }): ChildProcess;
  /**
   * `--max-semi-space-size` values (MiB) for extra one-hop rows, 'default' for V8's own sizing; the
   * main rows use 2 MiB as the image does.
   */
  semiSpaces?: string[];
  /** Appended to the row names, e.g. " (main)" for a baseline build. */
  label?: string;
}

/** Ports: A is the client-side sidecar, B the server-side one. */
const A = { egress: benchPort(6), ingress: benchPort(7), admin: benchPort(8) };
const B = { egress: benchPort(9), ingress: benchPort(10), admin: benchPort(11) };
const OTLP_SINK = benchPort(15);
/** The in-process pair (mTLS rows): A's egress. */
const PAIR_EGRESS = benchPort(16);

/** Whether this checkout has `outrigger proxy` yet. */
function proxyAvailable(main: string): boolean {
  const r = spawnSync(process.execPath, [main, 'proxy', '--help'], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.includes('--egress-port');
}

/** Polls a sidecar's /readyz until it answers 200 (bounded). */
async function readyz(adminPort: number, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { status } = await httpGet(adminPort, '/readyz');
    if (status === 200) return;
    if (Date.now() > deadline)
      throw new Error(`sidecar on admin port ${adminPort} not ready after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A loopback OTLP/HTTP collector that accepts and discards, so span export costs what it would. */
let sinkStarted: Promise<http.Server> | undefined;

/** Started once however many builds' rows are in the run. */
function startSink(): Promise<http.Server> {
  return (sinkStarted ??= listenSink());
}

function listenSink(): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  return new Promise((resolve) => server.listen(OTLP_SINK, '127.0.0.1', () => resolve(server)));
}

export interface SidecarPorts {
  egress: number;
  ingress: number;
  admin: number;
}

/** Node and `outrigger proxy` arguments of a benchmark sidecar (file source, explicit capture). */
export function sidecarArgs(o: {
  main: string;
  source: string;
  ports: SidecarPorts;
  otlpPort: number;
  semiSpace?: string;
  nodeFlags?: string[];
  extra?: string[];
}): string[] {
  // as the image and bin/outrigger.js run it (docs/benchmarks.md, "Memory"); `4+optimize-for-size`
  // adds V8 flags to a row
  const [semi = '4', ...flags] = (o.semiSpace ?? '4').split('+');
  return [
    ...(semi === 'default' ? [] : [`--max-semi-space-size=${semi}`]),
    ...flags.map((f) => `--${f}`),
    ...(o.nodeFlags ?? []),
    o.main,
    'proxy',
    '--source',
    `file:${o.source}`,
    '--capture',
    'explicit',
    '--namespace',
    'bench',
    '--egress-port',
    String(o.ports.egress),
    '--ingress-port',
    String(o.ports.ingress),
    '--admin-port',
    String(o.ports.admin),
    '--trace-collector',
    `http://127.0.0.1:${o.otlpPort}/`,
    '--log-level',
    'warn',
    ...(o.extra ?? []),
  ];
}

function sidecar(
  env: OutriggerEnv,
  source: string,
  ports: SidecarPorts,
  extra: string[] = [],
  semiSpace?: string,
): ChildProcess {
  return env.launch(
    process.execPath,
    sidecarArgs({
      main: env.main,
      source,
      ports,
      otlpPort: OTLP_SINK,
      extra,
      ...(semiSpace ? { semiSpace } : {}),
    }),
  );
}

export async function outriggerTargets(env: OutriggerEnv): Promise<BenchTarget[]> {
  if (!proxyAvailable(env.main)) {
    process.stderr.write(
      'bench: `outrigger proxy` is not available in this checkout; its rows are left out\n',
    );
    return [];
  }
  const source = path.join(env.dir, 'services.yaml');
  writeFileSync(
    source,
    serviceYaml('one-hop', 'bench', env.backendPort, '10.96.0.51') +
      '---\n' +
      serviceYaml('two-hop', 'bench', B.ingress, '10.96.0.52'),
  );
  const sink = await startSink();
  if (!env.label) process.once('exit', () => sink.close());
  const label = env.label ?? '';
  const oneHop = (name: string, semiSpace?: string): BenchTarget => ({
    name: `${name}${label}`,
    port: A.egress,
    authority: 'one-hop',
    start: () => [sidecar(env, source, A, [], semiSpace)],
    ready: () => readyz(A.admin),
    adminPorts: [A.admin],
    note: 'egress listener, explicit mode, Host: one-hop -> file-source Service -> backend',
  });
  return [
    oneHop('outrigger 1 hop'),
    {
      name: `outrigger 2 hops${label}`,
      port: A.egress,
      authority: 'two-hop',
      start: () => [
        sidecar(env, source, A),
        sidecar(env, source, B, ['--app-port', String(env.backendPort)]),
      ],
      ready: async () => {
        await readyz(A.admin);
        await readyz(B.admin);
      },
      adminPorts: [A.admin, B.admin],
      note: "egress of sidecar A -> ingress of sidecar B -> backend; CPU and RSS are both sidecars' sums",
    },
    ...(['plain', 'mtls'] as const).map((mode) => ({
      name: `outrigger 2 hops pair ${mode === 'mtls' ? 'mTLS' : 'plaintext'}`,
      port: PAIR_EGRESS,
      authority: 'two-hop',
      start: () => [
        env.launch(process.execPath, [
          '--max-semi-space-size=4',
          path.join(import.meta.dirname, 'mesh-pair-child.ts'),
          mode,
          String(PAIR_EGRESS),
          String(env.backendPort),
        ]),
      ],
      note:
        mode === 'mtls'
          ? "sidecars A (127.0.0.1) and B (127.0.0.2) in one process, A -> mutual TLS to B's mesh listener -> backend; tracing off"
          : "the same pair in one process, A -> plaintext to B's ingress listener -> backend; tracing off",
    })),
    ...(env.semiSpaces ?? []).map((s) =>
      oneHop(`outrigger 1 hop semi-space ${s.replace(/^(\d+)/, '$1 MiB').replaceAll('+', ' --')}`, s),
    ),
  ];
}
