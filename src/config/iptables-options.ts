import * as p from './parse.ts';
import type { TableSpec } from './resolve.ts';

type IptablesSpec<T> = TableSpec<T> & { describe: string };
const opt = <T>(o: IptablesSpec<T>): IptablesSpec<T> => o;

/**
 * The options of `outrigger iptables` that are its own (the ports and exclusions it captures are
 * the sidecar table's). It runs in the injected init container, so each has a variable too.
 * `--ipv6 off` was `--no-ipv6` before 0.2; that still works for one release, with a warning.
 */
export const iptablesOptions = {
  dryRun: opt({
    flag: '--dry-run',
    env: 'OUTRIGGER_DRY_RUN',
    parser: p.bool,
    default: false,
    describe: 'print the iptables-restore input instead of applying it',
  }),
  ipv6: opt<'auto' | 'off'>({
    flag: '--ipv6 <mode>',
    env: 'OUTRIGGER_IPV6',
    parser: p.oneOf('auto', 'off'),
    default: 'auto',
    describe: 'auto: also load the ip6tables rules when the kernel has IPv6; off: leave ip6tables alone',
    was: { flag: '--no-ipv6' },
  }),
  iptablesMode: opt<'plain' | 'nft' | 'legacy'>({
    flag: '--iptables-mode <mode>',
    env: 'OUTRIGGER_IPTABLES_MODE',
    parser: p.oneOf('plain', 'nft', 'legacy'),
    default: 'plain',
    describe: 'plain (iptables-restore as installed), nft or legacy (iptables-nft-/iptables-legacy-restore)',
  }),
};
export type IptablesConfig = { [K in keyof typeof iptablesOptions]: (typeof iptablesOptions)[K]['default'] };
