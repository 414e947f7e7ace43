// Loads the capture rules into the current network namespace (the init container's one job).
// Idempotent: it reads the nat table first and only appends jumps that are missing.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { renderRules, type CaptureSpec, type Family } from './iptables.ts';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export type Runner = (cmd: string, args: string[], input?: string) => RunResult;

export const spawnRunner: Runner = (cmd, args, input) => {
  const r = spawnSync(cmd, args, { input, encoding: 'utf8', timeout: 30_000 });
  const stderr = r.error ? `${r.error.message}\n${r.stderr ?? ''}` : (r.stderr ?? '');
  return { code: r.status ?? 1, stdout: r.stdout ?? '', stderr };
};

/**
 * Which iptables binaries: `plain` uses whatever `iptables-restore` is (Debian's alternatives pick
 * nf_tables); `nft` and `legacy` name the backend, as linkerd2-proxy-init's --iptables-mode does,
 * for nodes whose kernel lacks nf_tables or whose other rules live in the legacy backend.
 */
export type IptablesMode = 'plain' | 'nft' | 'legacy';

export interface ApplyOptions {
  families: Family[];
  mode?: IptablesMode;
  run?: Runner;
}

/** Whether the kernel has IPv6 in this namespace; without it ip6tables-restore can only fail. */
export function ipv6Available(): boolean {
  return existsSync('/proc/net/if_inet6');
}

export function tool(family: Family, mode: IptablesMode = 'plain'): string {
  const base = family === 6 ? 'ip6tables' : 'iptables';
  return mode === 'plain' ? base : `${base}-${mode}`;
}

/** Applies the rules for each family; throws with the tool's own message on the first failure. */
export function applyCapture(spec: CaptureSpec, opts: ApplyOptions): string[] {
  const run = opts.run ?? spawnRunner;
  const applied: string[] = [];
  for (const family of opts.families) {
    const bin = tool(family, opts.mode);
    const save = run(`${bin}-save`, ['-t', 'nat']);
    if (save.code !== 0) throw new Error(`${bin}-save -t nat failed (${save.code}): ${save.stderr.trim()}`);
    const rules = renderRules(spec, family, { existing: save.stdout });
    const restore = run(`${bin}-restore`, ['--noflush'], rules);
    if (restore.code !== 0)
      throw new Error(`${bin}-restore --noflush failed (${restore.code}): ${restore.stderr.trim()}`);
    applied.push(rules);
  }
  return applied;
}
