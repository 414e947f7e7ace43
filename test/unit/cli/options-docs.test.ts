import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Command } from 'commander';
import {
  CLI_DOC,
  renderOptionsTables,
  renderRenamesTable,
  withTables,
} from '../../../scripts/options-table.ts';
import { addTable } from '../../../src/cli/option-table.ts';
import { identityOptions } from '../../../src/config/identity-options.ts';

test("docs/cli.md's option and rename tables are what the commands define", () => {
  const doc = readFileSync(CLI_DOC, 'utf8');
  assert.equal(doc, withTables(doc), 'stale tables: run `node scripts/options-table.ts --write`');
});

test('a changed option shows as drift: a new flag, a new default, a new rename', () => {
  const cli = (): Command => {
    const root = new Command('outrigger');
    const cmd = new Command('identity');
    addTable(cmd, identityOptions);
    return root.addCommand(cmd);
  };
  const before = renderOptionsTables(cli());
  const changed = cli();
  changed.commands[0]!.option('--new-flag <v>', 'something new');
  assert.notEqual(renderOptionsTables(changed), before);
  assert.match(
    before,
    /\| `--cert-ttl <duration>` \| `OUTRIGGER_CERT_TTL` \| `"24h"` \| lifetime of issued certificates \|/,
  );
  assert.match(
    renderRenamesTable(cli()),
    /\| `--listen` \| `--listen-host` and `--https-port` \| identity \|/,
  );
});
