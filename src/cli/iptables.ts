// `outrigger iptables`: what the transparent-capture init container runs. It reads the same
// option table as the sidecar (flags and OUTRIGGER_* variables), so the ports it redirects to
// are the ports the proxy listens on.
import { Command } from 'commander';
import { iptablesOptions, type IptablesConfig } from '../config/iptables-options.ts';
import { loadConfig } from '../config/load.ts';
import { options, type OptionName } from '../config/options.ts';
import { deprecated, loadTable } from '../config/resolve.ts';
import { TABLE_HELP, addTable, type TableFlags } from './option-table.ts';
import type { Family } from '../proxy/capture/iptables.ts';
import { errorMessage } from '../shared/errors.ts';

const CAPTURE_OPTIONS = [
  'egressPort',
  'ingressPort',
  'adminPort',
  'proxyUid',
  'excludeInboundPorts',
  'excludeOutboundPorts',
  'excludeInboundCidrs',
  'excludeOutboundCidrs',
] as const satisfies readonly OptionName[];

export function iptablesCommand(): Command {
  const cmd = new Command('iptables').description(
    'load the transparent-capture rules (IPv4 and IPv6) into this network namespace; needs NET_ADMIN and NET_RAW',
  );
  const readOwn = addTable(cmd, iptablesOptions);
  const readCapture = addTable(cmd, options, CAPTURE_OPTIONS);
  cmd.addHelpText('after', TABLE_HELP);
  return cmd.action((opts: Record<string, unknown>) => {
    const own = loadTable<keyof typeof iptablesOptions, IptablesConfig>(iptablesOptions, {
      ...readOwn(opts),
      env: process.env,
    });
    // --ipv6's old spelling is a negated switch: commander reports it as ipv6 === false.
    if (opts['ipv6'] === false) {
      deprecated('--no-ipv6', '--ipv6 off');
      own.ipv6 = 'off';
    }
    return run(own, readCapture(opts));
  });
}

async function run(flags: IptablesConfig, table: TableFlags<OptionName>): Promise<void> {
  // Loaded on use (src/cli/index.ts): the sidecar builds this command but never runs it.
  const [{ applyCapture, ipv6Available }, { captureSpecFromConfig, renderRules }] = await Promise.all([
    import('../proxy/capture/apply.ts'),
    import('../proxy/capture/iptables.ts'),
  ]);
  const spec = captureSpecFromConfig(loadConfig({ ...table, env: process.env }));
  const mode = flags.iptablesMode;
  const families: Family[] = flags.ipv6 === 'auto' && (flags.dryRun || ipv6Available()) ? [4, 6] : [4];
  if (flags.dryRun) {
    for (const family of families) process.stdout.write(renderRules(spec, family));
    return;
  }
  try {
    applyCapture(spec, { families, mode });
  } catch (e) {
    throw new Error(
      `${errorMessage(e)}\nLoading the rules needs iptables-restore and the NET_ADMIN and NET_RAW capabilities in the pod's network namespace ` +
        '(the injected init container has them). To see the rules without applying them: outrigger iptables --dry-run',
      { cause: e },
    );
  }
  process.stderr.write(
    `outrigger: capture rules applied (IPv${families.join(' and IPv')}): outbound TCP -> ${spec.egressPort}, inbound TCP -> ${spec.ingressPort} except ${spec.adminPort}\n`,
  );
}
