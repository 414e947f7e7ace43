import { Command } from 'commander';
import { gatewayOptions } from '../config/gateway-options.ts';
import { TABLE_HELP, addTable } from './option-table.ts';

/**
 * `outrigger gateway`: the Ingress controller (IngressClass controller outrigger.dev/gateway). Its
 * flags come from the gateway's options table, each with its OUTRIGGER_<FLAG> variable and default.
 */
export function gatewayCommand(): Command {
  const cmd = new Command('gateway').description(
    'run the Ingress gateway: serves networking.k8s.io/v1 Ingresses of the outrigger class over HTTP and HTTPS',
  );
  const read = addTable(cmd, gatewayOptions);
  cmd.addHelpText('after', TABLE_HELP);
  return cmd.action(async (opts: Record<string, unknown>) => {
    // Loaded on use: building the command tree (every sidecar does) loads no gateway code.
    const { runGateway } = await import('../compose/gateway-run.ts');
    await runGateway(read(opts), process.env);
  });
}
