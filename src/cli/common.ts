import { accessSync, constants, existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { Option, type Command } from 'commander';
import { OutriggerError, errorMessage } from '../shared/errors.ts';

/**
 * Conventions every subcommand shares, so a user learns them once: where the kubeconfig comes
 * from, how machine-readable output is asked for, and how a missing input file is reported.
 */

/** --kubeconfig, else $OUTRIGGER_KUBECONFIG, else the first file of $KUBECONFIG, else ~/.kube/config when it exists (kubectl's order). */
export function defaultKubeconfig(env: Record<string, string | undefined> = process.env): string | undefined {
  const fromEnv = env.OUTRIGGER_KUBECONFIG || env.KUBECONFIG?.split(':').find((p) => p !== '');
  if (fromEnv) return fromEnv;
  const home = join(env.HOME ?? homedir(), '.kube', 'config');
  return existsSync(home) ? home : undefined;
}

export const KUBECONFIG_HELP = 'kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)';

/** `--json` and kubectl's `-o json` / `--output json`, which mean the same. */
export function addOutputOptions(cmd: Command, json = 'machine-readable JSON output'): Command {
  return cmd
    .option('--json', json)
    .addOption(
      new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'),
    );
}

export const wantsJson = (flags: { json?: boolean; output?: string }): boolean =>
  flags.json === true || flags.output === 'json';

/** A file the command cannot start without: its absence is reported with the flag that named it. */
export function requireReadableFile(flag: string, path: string): void {
  try {
    accessSync(path, constants.R_OK);
  } catch (e) {
    throw new OutriggerError('source_invalid', `${flag}: cannot read ${path}: ${errorMessage(e)}`);
  }
}
