import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { END, renderAnnotationsTable, START, withTable } from '../../../scripts/annotations-table.ts';
import { knownAnnotations } from '../../../src/config/load.ts';
import { repoRoot } from '../../harness/tools.ts';

test("README.md's annotation table is the one rendered from src/config/options.ts", () => {
  const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  assert.ok(readme.includes(START) && readme.includes(END), 'README.md has the annotation markers');
  assert.equal(readme, withTable(readme), 'stale table: run `node scripts/annotations-table.ts --write`');
});

test('the table lists every annotation the webhook accepts', () => {
  const table = renderAnnotationsTable();
  for (const a of knownAnnotations) assert.ok(table.includes(`\`${a}\``), a);
});

test('replacing the table keeps the rest of the README', () => {
  const readme = `# x\n${START}\nold\n${END}\nafter\n`;
  assert.equal(withTable(readme, 'T'), `# x\n${START}\nT\n${END}\nafter\n`);
  assert.throws(() => withTable('# no markers'), /markers/);
});
