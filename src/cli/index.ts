import { Command } from 'commander';
import { injectCommand } from './inject.ts';
import { proxyCommand } from './proxy.ts';
import { demoCommand } from './demo.ts';
import { gatewayCommand } from './gateway.ts';
import { statusCommand } from './status.ts';
import { iptablesCommand } from './iptables.ts';
import { resolveCommand } from './resolve.ts';
import { webhookCommand } from './webhook.ts';

/**
 * The `outrigger` command tree (DESIGN.md section 1). Each subcommand lives in its own file, which
 * defines its flags and help eagerly and imports what it runs inside its action: every sidecar
 * builds the whole tree, so a module imported at the top of any of these files is resident in
 * every pod (docs/benchmarks.md, "Memory").
 */
export function buildCli(): Command {
  const program = new Command('outrigger')
    .description(
      'Outrigger: a per-pod service-mesh sidecar for Kubernetes that keeps routing through API outages.',
    )
    .version(process.env.npm_package_version ?? '0.1.0')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride((err) => {
      // commander's own usage errors are configuration errors: exit status 2 like ours.
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') process.exit(0);
      process.exit(err.exitCode === 0 ? 0 : 2);
    });
  program.addCommand(demoCommand());
  program.addCommand(proxyCommand());
  program.addCommand(statusCommand());
  program.addCommand(iptablesCommand());
  program.addCommand(injectCommand());
  program.addCommand(webhookCommand());
  program.addCommand(resolveCommand());
  program.addCommand(gatewayCommand());
  return program;
}
