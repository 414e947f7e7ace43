// One compiled sidecar in front of the benchmark backend, for the profiling scripts: the backend,
// a loopback OTLP sink that discards what it gets, a Service file naming the backend, and the
// sidecar started with extra Node flags, resolved once it answers /readyz.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { httpGet } from '../../test/harness/http-get.ts';
import { serviceYaml } from '../../test/harness/tracing-relay.ts';
import { compiledBuild } from './build.ts';
import { sidecarArgs } from './outrigger.ts';
import { BACKEND_PORT, startBackend } from './peers.ts';
import { benchPort, dir, launch, sleep, waitPort } from './procs.ts';

export const PORTS = { egress: benchPort(106), ingress: benchPort(107), admin: benchPort(108) };
const SINK = benchPort(115);

/** The backend and the OTLP sink, once per script. */
export async function startStage(): Promise<void> {
  startBackend();
  await waitPort(BACKEND_PORT);
  launch(process.execPath, [
    '-e',
    `require('http').createServer((q,s)=>{q.resume();q.on('end',()=>s.end())}).listen(${SINK},'127.0.0.1')`,
  ]);
}

/** Polls until the process answers a status; gives up after 20 s. */
export async function untilAnswers(port: number, urlPath: string, status = 200): Promise<void> {
  for (let i = 0; (await httpGet(port, urlPath).catch(() => ({ status: 0 }))).status !== status; i++) {
    if (i > 200) throw new Error(`nothing answered ${urlPath} on port ${port}`);
    await sleep(100);
  }
}

/** The one-hop sidecar (Service `one-hop` -> the backend), ready. */
export async function startSidecar(o: {
  nodeFlags: string[];
  semiSpace?: string;
  sampling?: string;
}): Promise<ChildProcess> {
  const source = path.join(dir, 'services.yaml');
  writeFileSync(source, serviceYaml('one-hop', 'bench', BACKEND_PORT, '10.96.0.51'));
  const child = launch(
    process.execPath,
    sidecarArgs({
      main: compiledBuild().main,
      source,
      ports: PORTS,
      otlpPort: SINK,
      nodeFlags: o.nodeFlags,
      ...(o.semiSpace ? { semiSpace: o.semiSpace } : {}),
      extra: [
        '--app-port',
        String(BACKEND_PORT),
        '--drain-duration',
        '1s',
        ...(o.sampling ? ['--trace-sampling', o.sampling] : []),
      ],
    }),
  );
  await untilAnswers(PORTS.admin, '/readyz');
  return child;
}
