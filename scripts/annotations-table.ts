// Renders the README's annotation table from THE options table (src/config/options.ts), so the
// documentation cannot drift from what the webhook and the sidecar accept.
//   node scripts/annotations-table.ts          print the table
//   node scripts/annotations-table.ts --write  replace it in README.md between the markers
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { INJECTED_ANNOTATION, INJECTION_LABEL, options, type OptionName } from '../src/config/options.ts';

export const START = '<!-- annotations:start -->';
export const END = '<!-- annotations:end -->';

const cell = (s: string): string => s.replaceAll('|', '\\|').replaceAll('\n', ' ');

function shown(value: unknown): string {
  if (value === undefined) return 'off';
  if (Array.isArray(value)) return value.length === 0 ? 'none' : `\`${value.join(',')}\``;
  return `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``;
}

export function renderAnnotationsTable(): string {
  const rows = (Object.keys(options) as OptionName[]).flatMap((name) => {
    const o = options[name];
    if (o.annotation === undefined) return [];
    // The capture mode is decided (and pinned in the sidecar's env) when the pod is injected.
    const when = o.scope === 'inject' || name === 'capture' ? 'injection' : o.live ? 'live' : 'sidecar start';
    return [
      `| \`${o.annotation}\` | ${cell(o.parser.allowed)} | ${shown(o.default)} | ${when} | ${cell(o.describe)} (flag \`${o.flag.split(' ')[0]}\`, env \`${o.env}\`) |`,
    ];
  });
  return [
    '| annotation | values | default | takes effect | meaning |',
    '|---|---|---|---|---|',
    `| \`${INJECTION_LABEL}\` (namespace label) | \`enabled\` | not set | injection | opts every pod of the namespace in to injection |`,
    ...rows,
    `| \`${INJECTED_ANNOTATION}\` | set by the injector | | | marks an injected pod (version, capture mode, sidecar kind); it is never injected again |`,
    '',
    '"injection": read by the webhook when the pod is created. "sidecar start": read by the sidecar',
    'from the downward-API file at start-up. "live": also re-applied when the annotation changes.',
    'Precedence in the sidecar: flag > env > annotation > default; in the webhook a pod annotation',
    "overrides the webhook's own flags. An invalid value rejects the pod with a message that names",
    'the annotation, the value and the allowed values; an unknown `outrigger.dev/` key is rejected too.',
  ].join('\n');
}

/** README.md with the text between the markers replaced by the table. */
export function withTable(readme: string, table = renderAnnotationsTable()): string {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error(`README.md lacks the ${START} ... ${END} markers`);
  return `${readme.slice(0, start + START.length)}\n${table}\n${readme.slice(end)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--write')) {
    const file = path.resolve(import.meta.dirname, '../README.md');
    writeFileSync(file, withTable(readFileSync(file, 'utf8')));
  } else process.stdout.write(renderAnnotationsTable() + '\n');
}
