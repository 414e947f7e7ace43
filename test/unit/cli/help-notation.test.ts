import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Command } from 'commander';
import { buildCli } from '../../../src/cli/index.ts';
import { legacyPodNamespace } from '../../../src/cli/webhook.ts';

const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];

test("every command's help writes choices, env and default in one notation", () => {
  for (const cmd of all(buildCli())) {
    const help = cmd.helpInformation().replace(/\s+/g, ' ');
    assert.doesNotMatch(help, /, env: |\(env: |choices: /, `${cmd.name()}: commander's notation`);
    assert.doesNotMatch(help, /[(;] default [^:]/, `${cmd.name()}: "default: V", with its colon`);
    for (const o of cmd.options) {
      if (o.envVar) assert.ok(help.includes(`env ${o.envVar}`), `${cmd.name()} ${o.flags}: env ${o.envVar}`);
    }
  }
});

test('a commander option with env and default reads like a table option', () => {
  const listen = buildCli()
    .commands.find((c) => c.name() === 'identity')!
    .options.find((o) => o.long === '--listen')!;
  const line = buildCli()
    .commands.find((c) => c.name() === 'identity')!
    .createHelp()
    .optionDescription(listen);
  assert.equal(line, 'HTTPS listen address (env OUTRIGGER_IDENTITY_LISTEN; default: ":8443")');
});

test('every option of a command that runs in a pod has an OUTRIGGER_* variable, as the README says', () => {
  const inPod = new Set(['proxy', 'gateway', 'webhook', 'identity']);
  const commands = buildCli().commands.filter((c) => inPod.has(c.name()));
  assert.equal(commands.length, inPod.size);
  for (const cmd of commands) {
    const help = cmd.createHelp();
    for (const o of cmd.options.filter((x) => x.long !== '--help'))
      assert.match(help.optionDescription(o), /env OUTRIGGER_[A-Z_]+/, `${cmd.name()} ${o.flags}`);
  }
});

test("the webhook still reads its namespace from POD_NAMESPACE, the variable's old name, with a warning", () => {
  const lines: string[] = [];
  assert.equal(
    legacyPodNamespace({ POD_NAMESPACE: 'mesh' }, (l) => lines.push(l)),
    'mesh',
  );
  assert.match(lines.join(''), /POD_NAMESPACE is deprecated; set OUTRIGGER_POD_NAMESPACE/);
  assert.equal(
    legacyPodNamespace({}, (l) => lines.push(l)),
    undefined,
  );
  assert.equal(lines.length, 1);
});
