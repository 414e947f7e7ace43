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
import type { BenchTarget } from './run.ts';

export interface OutriggerEnv {
  dir: string;
  backendPort: number;
  /** The outrigger CLI entry point (compiled or source). */
  main: string;
  launch(cmd: string, argv: string[], opts?: { env?: NodeJS.ProcessEnv }): ChildProcess;
}

/** Ports: A is the client-side sidecar, B the server-side one. */
const A = { egress: 18086, ingress: 18087, admin: 18088 };
const B = { egress: 18089, ingress: 18090, admin: 18091 };
const OTLP_SINK = 18095;
/** The in-process pair (mTLS rows): A's egress. */
const PAIR_EGRESS = 18096;

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
function startSink(): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  return new Promise((resolve) => server.listen(OTLP_SINK, '127.0.0.1', () => resolve(server)));
}

function sidecar(env: OutriggerEnv, source: string, ports: typeof A, extra: string[] = []): ChildProcess {
  return env.launch(process.execPath, [
    // As the image and bin/outrigger.js run it (docs/benchmarks.md, "Memory").
    '--max-semi-space-size=2',
    env.main,
    'proxy',
    '--source',
    `file:${source}`,
    '--capture',
    'explicit',
    '--namespace',
    'bench',
    '--egress-port',
    String(ports.egress),
    '--ingress-port',
    String(ports.ingress),
    '--admin-port',
    String(ports.admin),
    '--trace-endpoint',
    `http://127.0.0.1:${OTLP_SINK}/`,
    '--log-level',
    'warn',
    ...extra,
  ]);
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
  process.once('exit', () => sink.close());
  return [
    {
      name: 'outrigger 1 hop',
      port: A.egress,
      authority: 'one-hop',
      start: () => [sidecar(env, source, A)],
      ready: () => readyz(A.admin),
      note: 'egress listener, explicit mode, Host: one-hop -> file-source Service -> backend',
    },
    {
      name: 'outrigger 2 hops',
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
      note: "egress of sidecar A -> ingress of sidecar B -> backend; CPU and RSS are both sidecars' sums",
    },
    ...(['plain', 'mtls'] as const).map((mode) => ({
      name: `outrigger 2 hops pair ${mode === 'mtls' ? 'mTLS' : 'plaintext'}`,
      port: PAIR_EGRESS,
      authority: 'two-hop',
      start: () => [
        env.launch(process.execPath, [
          '--max-semi-space-size=2',
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
  ];
}
