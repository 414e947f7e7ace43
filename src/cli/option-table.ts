import { Option, type Command } from 'commander';
import { loadTable, type TableInputs, type TableSpec } from '../config/resolve.ts';
import { optionHelp } from './common.ts';

type HelpSpec = TableSpec<unknown> & { describe: string; repeatable?: boolean; live?: boolean };
export type TableFlags<N extends string> = Required<Pick<TableInputs<N>, 'flags' | 'oldFlags'>>;

/** The help's closing words for a command whose options all come from a table without annotations. */
export const TABLE_HELP =
  '\nPrecedence: flag > OUTRIGGER_* environment variable > default. An invalid value exits with status 2\n' +
  'and names the key, the value and what is allowed.';

/** The same closing words for a command a person runs: its table has no variables (NO_ENV). */
export const PERSON_HELP =
  "\nPrecedence: flag > default; no OUTRIGGER_* variable is read but the kubeconfig's (--kubeconfig, then\n" +
  '$OUTRIGGER_KUBECONFIG, then $KUBECONFIG). An invalid value exits with status 2 and names the key, the\n' +
  'value and what is allowed.';

const collect = (v: string, prev: string[] | undefined): string[] => [...(prev ?? []), v];

const specs = new WeakMap<Option, HelpSpec>();
/** The table row a command's option was made from, for the generated docs (docs/cli.md). */
export const specOfOption = (o: Option): HelpSpec | undefined => specs.get(o);

/**
 * Adds a table's options to a command, each with its help in the one notation and, hidden from the
 * help, the old spelling of a renamed flag (two options renamed from one flag share it). Returns
 * what turns commander's parsed values back into raw values by option name, for the table's
 * loader to validate with precedence and deprecation warnings.
 */
export function addTable<N extends string>(
  cmd: Command,
  table: Record<N, HelpSpec>,
  names: readonly N[] = Object.keys(table) as N[],
): (opts: Record<string, unknown>) => TableFlags<N> {
  const byAttribute = new Map<string, { name: N; old: boolean }[]>();
  const bind = (o: Option, name: N, old: boolean): void => {
    const key = o.attributeName();
    byAttribute.set(key, [...(byAttribute.get(key) ?? []), { name, old }]);
  };
  for (const name of names) {
    const spec = table[name];
    const o = new Option(spec.flag, optionHelp(spec));
    // Repeatable flags collect every value; the loader joins them with commas.
    if (spec.repeatable) o.argParser(collect);
    specs.set(o, spec);
    cmd.addOption(o);
    bind(o, name, false);
    const oldFlag = spec.was?.flag;
    if (oldFlag === undefined) continue;
    const shared = cmd.options.find((x) => x.flags === oldFlag);
    const old = shared ?? new Option(oldFlag).hideHelp();
    if (!shared) cmd.addOption(old);
    bind(old, name, true);
  }
  return (opts) => {
    const out: TableFlags<N> = { flags: {}, oldFlags: {} };
    for (const [attr, value] of Object.entries(opts)) {
      // A switch (--allow-unbound-tokens) reads as the value its variable would take.
      const raw = value === true ? 'true' : value;
      if (typeof raw !== 'string' && !Array.isArray(raw)) continue;
      for (const { name, old } of byAttribute.get(attr) ?? []) {
        if (old) out.oldFlags[name] = String(raw);
        else out.flags[name] = raw as string | string[];
      }
    }
    return out;
  };
}

/**
 * A command a person runs: its table's options, the person's precedence line, and its action
 * given the table's values and the command's arguments. No environment is passed to the loader:
 * these commands read no OUTRIGGER_* variable (src/config/person-options.ts).
 */
export function personTable<N extends string, C>(
  cmd: Command,
  table: Record<N, HelpSpec>,
  run: (flags: C, args: string[]) => Promise<void> | void,
): Command {
  const read = addTable(cmd, table);
  cmd.addHelpText('after', PERSON_HELP);
  return cmd.action((...a: unknown[]) => {
    // commander calls action(...arguments, options, command).
    const opts = a[a.length - 2] as Record<string, unknown>;
    return run(loadTable<N, C>(table, read(opts)), a.slice(0, -2) as string[]);
  });
}
