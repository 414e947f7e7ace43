import type { OptionSpec } from './options.ts';
import { parseValue } from './parse.ts';

/** What the resolver needs of an option of any command's table. */
export type TableSpec<T> = Pick<OptionSpec<T>, 'flag' | 'env' | 'parser' | 'default' | 'was'> &
  Partial<Pick<OptionSpec<T>, 'annotation'>>;

export interface RawValues {
  flag?: string | string[] | undefined;
  oldFlag?: string | undefined;
  env?: Record<string, string | undefined>;
  annotations?: Record<string, string>;
}

type Warn = (line: string) => unknown;
let warnSink: Warn = (line) => process.stderr.write(line);
const warned = new Set<string>();

/** Where deprecation warnings go; tests collect them. Returns the previous sink. */
export function setDeprecationSink(sink: Warn): Warn {
  const previous = warnSink;
  warnSink = sink;
  warned.clear();
  return previous;
}

/** One warning per old spelling and process, however often the configuration is loaded. */
export function deprecated(old: string, now: string): void {
  if (warned.has(old)) return;
  warned.add(old);
  warnSink(`outrigger: warning: ${old} is deprecated and goes in the next release; use ${now}\n`);
}

/** The long name of a flag: --output of "-o, --output <format>". */
export const flagName = (spec: { flag: string }): string => /--[\w-]+/.exec(spec.flag)?.[0] ?? spec.flag;

/**
 * One value of a table option, with the precedence every command shares: flag > the flag's old
 * spelling > variable > the variable's old spelling > annotation > default. An old spelling is
 * read for one release after a rename and warned about once (docs/cli.md, "Renamed options").
 * `renamedTo` names every new spelling of an old one, for an old flag split in two (--listen
 * HOST:PORT is --listen-host and --https-port); by default the spec's own.
 */
export function resolveValue<T>(
  spec: TableSpec<T>,
  raw: RawValues,
  renamedTo: (old: string, now: string) => string = (_, now) => now,
): T {
  const { flag, oldFlag, env = {}, annotations = {} } = raw;
  const was = spec.was;
  const oldParser = was?.parser ?? spec.parser;
  if (flag !== undefined)
    return parseValue(
      spec.parser,
      flagName(spec),
      Array.isArray(flag) ? flag.join(spec.parser.join ?? ',') : flag,
      'flag',
    );
  if (oldFlag !== undefined && was?.flag) {
    const old = flagName({ flag: was.flag });
    deprecated(old, renamedTo(old, flagName(spec)));
    return parseValue(oldParser, old, oldFlag, 'flag');
  }
  const fromEnv = env[spec.env];
  if (fromEnv !== undefined && fromEnv !== '')
    return parseValue(spec.parser, spec.env, fromEnv, 'environment variable');
  const fromOldEnv = was?.env === undefined ? undefined : env[was.env];
  if (was?.env !== undefined && fromOldEnv !== undefined && fromOldEnv !== '') {
    deprecated(was.env, renamedTo(was.env, spec.env));
    return parseValue(oldParser, was.env, fromOldEnv, 'environment variable');
  }
  const fromAnn = spec.annotation === undefined ? undefined : annotations[spec.annotation];
  if (spec.annotation !== undefined && fromAnn !== undefined)
    return parseValue(spec.parser, spec.annotation, fromAnn, 'annotation');
  return spec.default;
}

export interface TableInputs<N extends string> {
  flags?: Partial<Record<N, string | string[]>>;
  oldFlags?: Partial<Record<N, string>>;
  env?: Record<string, string | undefined>;
}

/** Every option of a table, validated; the first invalid value throws config_invalid. */
export function loadTable<N extends string, C>(
  table: Record<N, TableSpec<unknown>>,
  inputs: TableInputs<N>,
): C {
  const specs = Object.values<TableSpec<unknown>>(table);
  const wasFlag = (s: TableSpec<unknown>): string | undefined =>
    s.was?.flag === undefined ? undefined : flagName({ flag: s.was.flag });
  const renamedTo = (old: string): string =>
    [
      ...specs.filter((s) => s.was?.env === old).map((s) => s.env),
      ...specs.filter((s) => wasFlag(s) === old).map(flagName),
    ].join(' and ');
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(table) as N[])
    out[name] = resolveValue(
      table[name],
      { flag: inputs.flags?.[name], oldFlag: inputs.oldFlags?.[name], env: inputs.env ?? {} },
      renamedTo,
    );
  return out as C;
}
