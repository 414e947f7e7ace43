import { accessSync, constants, existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { OptionSpec } from '../config/options.ts';
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

export { KUBECONFIG_HELP } from '../config/person-options.ts';

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

/**
 * The help text of a table option, in one notation for every command: what it does, then
 * (allowed values; env; annotation; live; default: V), the way commander prints its own defaults.
 */
export function optionHelp(
  spec: Pick<OptionSpec<unknown>, 'parser' | 'env' | 'default' | 'describe'> &
    Partial<Pick<OptionSpec<unknown>, 'annotation' | 'live'>>,
): string {
  const allowed = spec.parser.allowed;
  const parts = [
    ...(allowed.startsWith('one of ') || allowed === 'true or false' ? [allowed] : []),
    // A command a person runs reads no variable (NO_ENV): its help names none.
    ...(spec.env === '' ? [] : [`env ${spec.env}`]),
    ...(spec.annotation ? [`annotation ${spec.annotation}`] : []),
    ...(spec.live ? ['live'] : []),
    // An unset default that the description already explains ("default: the pod's") is not repeated.
    ...(spec.default === undefined && spec.describe.includes('(default:')
      ? []
      : [`default: ${defaultText(spec)}`]),
  ];
  return parts.length === 0 ? spec.describe : `${spec.describe} (${parts.join('; ')})`;
}

/** A table option's default as --help and docs/cli.md show it: a duration as typed (30s). */
export const defaultText = (spec: Pick<OptionSpec<unknown>, 'parser' | 'default'>): string =>
  spec.parser.show ? JSON.stringify(spec.parser.show(spec.default)) : shownDefault(spec.default);

/** Strings quoted and numbers bare, as commander shows the defaults of its own options. */
function shownDefault(d: unknown): string {
  if (d === undefined) return 'unset';
  if (Array.isArray(d)) return d.length === 0 ? 'none' : JSON.stringify(d.join(','));
  if (typeof d === 'object' && d !== null) return JSON.stringify(Object.values(d).map(String).join(':'));
  return JSON.stringify(d);
}

/** Rows as left-aligned columns two spaces apart, as kubectl prints them. */
export function formatTable(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd(),
  );
}
