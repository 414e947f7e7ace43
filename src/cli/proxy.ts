import { Command } from 'commander';
import { options, type OptionName } from '../config/options.ts';
import { addTable } from './option-table.ts';
import { explainStartError, proxyPreflight } from './proxy-preflight.ts';

/**
 * `outrigger proxy`: the sidecar. Its flags are generated from the one options table, so --help
 * lists every setting with its environment variable, annotation and default, and precedence
 * (flag > env > annotation > default) and validation stay in the shared loader.
 */
const proxyOptions = (Object.keys(options) as OptionName[]).filter((n) => options[n].scope === 'proxy');

export function proxyCommand(): Command {
  const cmd = new Command('proxy').description('run the sidecar: egress, ingress and admin listeners');
  const read = addTable(cmd, options, proxyOptions);
  cmd.addHelpText(
    'after',
    '\nPrecedence: flag > OUTRIGGER_* environment variable > pod annotation (downward-API file in --pod-info-dir) > default.\n' +
      'An invalid value exits with status 2 and names the key, the value and what is allowed.\n' +
      'Live options are re-applied when the annotations file changes; the rest need a restart.',
  );
  return cmd.action(async (opts: Record<string, unknown>) => {
    // Loaded on use (src/cli/index.ts): building the command tree for --help loads no data path.
    const { runSidecar } = await import('../compose/sidecar.ts');
    const checked = proxyPreflight(read(opts), process.env);
    await runSidecar({ ...checked, env: process.env }).catch((e: unknown) => {
      throw explainStartError(e, checked, process.env);
    });
  });
}
