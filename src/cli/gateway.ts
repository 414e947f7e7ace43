import { Command, Option } from 'commander';
import { gatewayOptions, type GatewayOptionName } from '../config/gateway-options.ts';
import { optionHelp } from './common.ts';

/**
 * `outrigger gateway`: the Ingress controller (IngressClass controller outrigger.dev/gateway). Its
 * flags come from the gateway's options table, each with its OUTRIGGER_* variable and default.
 */
export function gatewayCommand(): Command {
  const cmd = new Command('gateway').description(
    'run the Ingress gateway: serves networking.k8s.io/v1 Ingresses of the outrigger class over HTTP and HTTPS',
  );
  const byAttribute = new Map<string, GatewayOptionName>();
  for (const name of Object.keys(gatewayOptions) as GatewayOptionName[]) {
    const o = new Option(gatewayOptions[name].flag, optionHelp(gatewayOptions[name]));
    byAttribute.set(o.attributeName(), name);
    cmd.addOption(o);
  }
  cmd.addHelpText(
    'after',
    '\nPrecedence: flag > OUTRIGGER_* environment variable > default. An invalid value exits with status 2\n' +
      'and names the key, the value and what is allowed.',
  );
  return cmd.action(async (opts: Record<string, string | undefined>) => {
    const flags: Partial<Record<GatewayOptionName, string>> = {};
    for (const [attr, value] of Object.entries(opts)) {
      const name = byAttribute.get(attr);
      if (name && value !== undefined) flags[name] = value;
    }
    // Loaded on use: building the command tree (every sidecar does) loads no gateway code.
    const { runGateway } = await import('../compose/gateway-run.ts');
    await runGateway(flags, process.env);
  });
}
