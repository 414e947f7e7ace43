import { Command, type Option } from 'commander';
import { identityCommand } from './identity.ts';
import { unknownEnv } from '../config/load.ts';
import { createLogger } from '../shared/log.ts';
import { outriggerVersion } from '../shared/app-root.ts';
import { checkCommand } from './check.ts';
import { injectCommand } from './inject.ts';
import { installCommand } from './install.ts';
import { uninstallCommand } from './uninstall.ts';
import { proxyCommand } from './proxy.ts';
import { demoCommand } from './demo.ts';
import { gatewayCommand } from './gateway.ts';
import { statusCommand } from './status.ts';
import { iptablesCommand } from './iptables.ts';
import { resolveCommand } from './resolve.ts';
import { versionCommand } from './version.ts';
import { webhookCommand } from './webhook.ts';

/**
 * The `outrigger` command tree. Each subcommand lives in its own file, which defines its flags and
 * help eagerly and imports what it runs inside its action: every sidecar builds the whole tree, so
 * a module imported at the top of any of these files is resident in every pod
 * (docs/benchmarks.md, "Memory").
 *
 * Exit statuses, the same in every command: 0 success; 2 invalid input (an unknown command or
 * flag, a missing argument, a bad value of a flag, variable or annotation, a malformed manifest,
 * kubeconfig or certificate: commander's errors and ours); 1 a runtime failure (a file that cannot
 * be read, a server that cannot be reached or refuses, a system call that fails).
 */
export function buildCli(): Command {
  const program = new Command('outrigger')
    .description(
      'Outrigger: a per-pod service-mesh sidecar for Kubernetes that keeps routing through API outages.',
    )
    .version(outriggerVersion)
    .addHelpText(
      'after',
      '\nExit status: 0 success; 2 invalid input (command, flag, value or file content); 1 runtime failure (unreadable file, unreachable server, failed system call).',
    );
  for (const cmd of [
    demoCommand(),
    proxyCommand(),
    statusCommand(),
    iptablesCommand(),
    injectCommand(),
    webhookCommand(),
    resolveCommand(),
    installCommand(),
    uninstallCommand(),
    checkCommand(),
    versionCommand(),
    gatewayCommand(),
    identityCommand(),
  ])
    program.addCommand(cmd);
  applyConventions(program);
  program.hook('preAction', (_root, action) => warnUnknownEnv(action.name()));
  return program;
}

/**
 * One notation in every command's help: the options defined by a table carry it in their
 * description already (see optionHelp); commander's own choices, env and default are written the
 * same way, `(one of a, b; env X; default: V)`, instead of commander's `(default: V, env: X)`.
 */
export function optionDescription(o: Option): string {
  const parts = [
    ...(o.argChoices ? [`one of ${o.argChoices.join(', ')}`] : []),
    ...(o.envVar ? [`env ${o.envVar}`] : []),
    ...(o.defaultValue !== undefined && (o.required || o.optional || typeof o.defaultValue === 'boolean')
      ? [`default: ${o.defaultValueDescription ?? JSON.stringify(o.defaultValue)}`]
      : []),
  ];
  return parts.length > 0 ? `${o.description} (${parts.join('; ')})` : o.description;
}

/** addCommand() copies no settings to subcommands: give each the same help and error handling. */
function applyConventions(cmd: Command): void {
  cmd.configureHelp({ optionDescription });
  cmd.showHelpAfterError('(run with --help for usage)').exitOverride((err) => {
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') process.exit(0);
    // commander's own errors are usage errors: status 2, like an invalid value of ours.
    process.exit(err.exitCode === 0 ? 0 : 2);
  });
  for (const sub of cmd.commands) applyConventions(sub);
}

/** Long-running commands log JSON lines; the others talk to a person. */
const LOGGING = new Set(['proxy', 'webhook', 'gateway']);

function warnUnknownEnv(command: string): void {
  for (const { name, nearest } of unknownEnv(process.env)) {
    if (LOGGING.has(command))
      createLogger({ base: { component: 'outrigger' } }).warn('unknown environment variable ignored', {
        variable: name,
        nearest,
      });
    else
      process.stderr.write(
        `outrigger: warning: unknown environment variable ${name} ignored (did you mean ${nearest}?)\n`,
      );
  }
}
