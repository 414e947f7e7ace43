// Renders docs/cli.md's tables of every command's options and of the renamed ones from the
// commands themselves (the option tables behind proxy, gateway, webhook, identity, inject and
// iptables; commander's own options elsewhere), so the docs cannot drift from --help.
//   node scripts/options-table.ts          print the tables
//   node scripts/options-table.ts --write  replace them in docs/cli.md between the markers
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command, Option } from 'commander';
import { defaultText } from '../src/cli/common.ts';
import { buildCli } from '../src/cli/index.ts';
import { specOfOption } from '../src/cli/option-table.ts';

export const MARKERS = {
  options: ['<!-- options:start -->', '<!-- options:end -->'],
  renames: ['<!-- renames:start -->', '<!-- renames:end -->'],
} as const;

const cell = (s: string): string => s.replaceAll('|', '\\|').replaceAll('\n', ' ');
const code = (s: string): string => (s === '' ? '' : `\`${cell(s)}\``);
const visible = (cmd: Command): Option[] => cmd.options.filter((o) => !o.hidden);

function row(o: Option): string {
  const spec = specOfOption(o);
  if (spec) {
    const allowed = spec.parser.allowed.startsWith('one of ') ? ` (${spec.parser.allowed})` : '';
    const annotation = spec.annotation ? `; annotation \`${spec.annotation}\`` : '';
    // NO_ENV: a command a person runs reads no variable, and the table says so.
    const variable = spec.env === '' ? 'none' : code(spec.env);
    return `| ${code(spec.flag)} | ${variable} | ${code(defaultText(spec))} | ${cell(spec.describe + allowed + annotation)} |`;
  }
  const shown =
    o.defaultValue === undefined ? '' : (o.defaultValueDescription ?? JSON.stringify(o.defaultValue));
  const choices = o.argChoices ? ` (one of ${o.argChoices.join(', ')})` : '';
  return `| ${code(o.flags)} | ${code(o.envVar ?? '')} | ${code(shown)} | ${cell(o.description + choices)} |`;
}

export function renderOptionsTables(cli = buildCli()): string {
  return cli.commands
    .filter((cmd) => visible(cmd).length > 0)
    .map((cmd) =>
      [
        `### outrigger ${cmd.name()}`,
        '',
        '| flag | variable | default | meaning |',
        '|---|---|---|---|',
        ...visible(cmd).map(row),
      ].join('\n'),
    )
    .join('\n\n');
}

/** Old spelling -> new, with the commands that still read it. */
export function renderRenamesTable(cli = buildCli()): string {
  const renames = new Map<string, { now: Set<string>; commands: Set<string> }>();
  const add = (old: string | undefined, now: string, command: string): void => {
    if (old === undefined || now === '') return;
    const r = renames.get(old) ?? { now: new Set(), commands: new Set() };
    r.now.add(now);
    r.commands.add(command);
    renames.set(old, r);
  };
  for (const cmd of cli.commands)
    for (const o of cmd.options) {
      const spec = specOfOption(o);
      if (spec?.was === undefined) continue;
      add(spec.was.flag?.split(' ')[0], spec.flag.split(' ')[0] ?? spec.flag, cmd.name());
      add(spec.was.env, spec.env, cmd.name());
    }
  return [
    '| old spelling | new spelling | commands |',
    '|---|---|---|',
    ...[...renames].map(
      ([old, r]) =>
        `| ${code(old)} | ${[...r.now].map(code).join(' and ')} | ${[...r.commands].join(', ')} |`,
    ),
  ].join('\n');
}

/** The document with the text between each pair of markers replaced by its table. */
export function withTables(doc: string, cli = buildCli()): string {
  const tables = { options: renderOptionsTables(cli), renames: renderRenamesTable(cli) };
  let out = doc;
  for (const [key, [start, end]] of Object.entries(MARKERS)) {
    const a = out.indexOf(start);
    const b = out.indexOf(end);
    if (a < 0 || b < a) throw new Error(`docs/cli.md lacks the ${start} ... ${end} markers`);
    out = `${out.slice(0, a + start.length)}\n${tables[key as keyof typeof tables]}\n${out.slice(b)}`;
  }
  return out;
}

export const CLI_DOC = path.resolve(import.meta.dirname, '../docs/cli.md');

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--write')) writeFileSync(CLI_DOC, withTables(readFileSync(CLI_DOC, 'utf8')));
  else process.stdout.write(`${renderRenamesTable()}\n\n${renderOptionsTables()}\n`);
}
