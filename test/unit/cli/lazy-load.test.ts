import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { buildCli } from '../../../src/cli/index.ts';
import { repoRoot } from '../../harness/tools.ts';

const main = path.join(repoRoot, 'src/main.ts');

/** Every module URL a fresh process loads while it imports src/cli/index.ts and builds the tree. */
function modulesLoadedByBuildingTheCli(): string[] {
  const script = `
    import { registerHooks } from 'node:module';
    const loaded = [];
    registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
    const { buildCli } = await import(${JSON.stringify(path.join(repoRoot, 'src/cli/index.ts'))});
    buildCli();
    process.stdout.write(JSON.stringify(loaded));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as string[];
}

test('building the command tree loads no subcommand implementation (every sidecar builds it)', () => {
  const loaded = modulesLoadedByBuildingTheCli();
  assert.ok(
    loaded.some((u) => u.endsWith('/src/cli/proxy.ts')),
    'the hook saw the CLI modules load',
  );
  const heavy = [
    /\/src\/compose\//,
    /\/src\/tracing\//,
    /\/src\/discovery\/(index|file-source|manifest|kube\/)/,
    /\/src\/proxy\//,
    /\/src\/injector\/(manifests|server)\.ts$/,
    /\/node_modules\/(@opentelemetry|@kubernetes|yaml|prom-client|http-proxy|koffi|protobufjs)\//,
  ];
  const offending = loaded.filter((u) => heavy.some((re) => re.test(u)));
  assert.deepEqual(offending, [], 'move these imports into the subcommand action');
});

test('outrigger --help and every subcommand --help still list all their options', () => {
  const help = (...args: string[]): string => {
    const r = spawnSync(process.execPath, [main, ...args, '--help'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };
  const commands = buildCli().commands;
  assert.ok(commands.some((c) => c.name() === 'proxy'));
  const top = help();
  for (const cmd of commands) {
    assert.match(top, new RegExp(`^  ${cmd.name()} `, 'm'));
    const text = help(cmd.name());
    // Hidden: the old spellings of renamed flags, read for one release (docs/cli.md).
    for (const option of cmd.options.filter((o) => !o.hidden))
      assert.ok(text.includes(option.flags), `${cmd.name()}: ${option.flags}`);
  }
});
