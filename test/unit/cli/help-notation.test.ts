import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Command } from 'commander';
import { buildCli } from '../../../src/cli/index.ts';
import { runCli } from '../../harness/cli.ts';

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

test('a table option of identity reads like every other table option', () => {
  const listen = buildCli()
    .commands.find((c) => c.name() === 'identity')!
    .options.find((o) => o.long === '--https-port')!;
  const line = buildCli()
    .commands.find((c) => c.name() === 'identity')!
    .createHelp()
    .optionDescription(listen);
  assert.equal(line, 'HTTPS listener port (env OUTRIGGER_HTTPS_PORT; default: 8443)');
});

test('every option of a command that runs in a pod has an OUTRIGGER_* variable, as the README says', () => {
  const inPod = new Set(['proxy', 'gateway', 'webhook', 'identity', 'iptables']);
  const commands = buildCli().commands.filter((c) => inPod.has(c.name()));
  assert.equal(commands.length, inPod.size);
  for (const cmd of commands) {
    const help = cmd.createHelp();
    for (const o of cmd.options.filter((x) => x.long !== '--help' && !x.hidden))
      assert.match(help.optionDescription(o), /env OUTRIGGER_[A-Z_]+/, `${cmd.name()} ${o.flags}`);
  }
});

test('the commands a person runs take flags only: no OUTRIGGER_* variable, and their help says so', async () => {
  for (const name of ['install', 'uninstall', 'check', 'version', 'status', 'demo', 'resolve', 'inject']) {
    const cmd = buildCli().commands.find((c) => c.name() === name)!;
    const help = cmd.helpInformation();
    assert.doesNotMatch(help, /env OUTRIGGER_/, name);
    const out: string[] = [];
    cmd.configureOutput({ writeOut: (s) => out.push(s) });
    cmd.outputHelp();
    assert.match(out.join('').replace(/\s+/g, ' '), /no OUTRIGGER_\* variable is read/, name);
  }
  // A variable left in a shell changes nothing install prints.
  const env = {
    OUTRIGGER_IMAGE: 'elsewhere/outrigger:9',
    OUTRIGGER_GATEWAY: 'true',
    OUTRIGGER_IDENTITY: 'true',
  };
  const r = await runCli(['install'], { env });
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stdout, /elsewhere|outrigger-gateway|outrigger-identity/);
  // Nor what inject prints: the pod's shape comes from its flags and annotations.
  const pod =
    'apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: app, image: nginx}]\n';
  const plain = await runCli(['inject', '-f', '-'], { input: pod });
  const shell = await runCli(['inject', '-f', '-'], {
    input: pod,
    env: { OUTRIGGER_PROXY_IMAGE: 'elsewhere/outrigger:9', OUTRIGGER_PROXY_CPU: '3' },
  });
  assert.equal(shell.status, 0, shell.stderr);
  assert.equal(shell.stdout, plain.stdout);
});
