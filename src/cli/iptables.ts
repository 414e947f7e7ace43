// `outrigger iptables`: what the transparent-capture init container runs. It reads the same
// option table as the sidecar (flags and OUTRIGGER_* variables), so the ports it redirects to
// are the ports the proxy listens on.
import { Command, Option } from 'commander';
import { loadConfig } from '../config/load.ts';
import { options, type OptionName } from '../config/options.ts';
import { oneOf, parseValue } from '../config/parse.ts';
import { addTable, type TableFlags } from './option-table.ts';
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

interface Flags {
  dryRun?: boolean;
  ipv6: boolean;
  iptablesMode: string;
  [name: string]: unknown;
}

export function iptablesCommand(): Command {
  const cmd = new Command('iptables')
    .description(
      'load the transparent-capture rules (IPv4 and IPv6) into this network namespace; needs NET_ADMIN and NET_RAW',
    )
    .option('--dry-run', 'print the iptables-restore input instead of applying it')
    .option('--no-ipv6', 'leave ip6tables alone (default: applied when the kernel has IPv6)')
    .addOption(
      new Option(
        '--iptables-mode <mode>',
        'plain (iptables-restore as installed), nft or legacy (iptables-nft-/iptables-legacy-restore)',
      )
        .choices(['plain', 'nft', 'legacy'])
        .default('plain'),
    );
  const read = addTable(cmd, options, CAPTURE_OPTIONS);
  return cmd.action((flags: Flags) => run(flags, read(flags)));
}

async function run(flags: Flags, table: TableFlags<OptionName>): Promise<void> {
  // Loaded on use (src/cli/index.ts): the sidecar builds this command but never runs it.
  const [{ applyCapture, ipv6Available }, { captureSpecFromConfig, renderRules }] = await Promise.all([
    import('../proxy/capture/apply.ts'),
    import('../proxy/capture/iptables.ts'),
  ]);
  const spec = captureSpecFromConfig(loadConfig({ ...table, env: process.env }));
  const mode = parseValue(oneOf('plain', 'nft', 'legacy'), '--iptables-mode', flags.iptablesMode, 'flag');
  const families: Family[] = flags.ipv6 && (flags.dryRun || ipv6Available()) ? [4, 6] : [4];
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
