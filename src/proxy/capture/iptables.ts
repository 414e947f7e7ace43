// The rules the init container loads into the pod's network namespace for transparent capture,
// as iptables-restore input. Linkerd's minimal shape: two chains in
// the nat table, the proxy's UID and loopback return first, everything else TCP is redirected.
// Pure: the same input always gives the same text, which the golden files pin down.
import { CidrError, parseCidr } from '../../config/cidr.ts';
import { options, type Config } from '../../config/options.ts';
import { OutriggerError } from '../../shared/errors.ts';

export interface CaptureSpec {
  egressPort: number;
  ingressPort: number;
  adminPort: number;
  /** Meshed callers reach the mesh listener directly; on a pod without one they must be refused, not redirected. */
  meshPort: number;
  /** The sidecar's UID: its own connections go out unredirected (the loop guard in the kernel). */
  proxyUid: number;
  /** Ports as '25' or ranges as '8000:8100' (the config parser's iptables form). */
  excludeInboundPorts: readonly string[];
  excludeOutboundPorts: readonly string[];
  /** Inbound: SOURCE CIDRs that bypass; outbound: DESTINATION CIDRs that bypass. */
  excludeInboundCidrs: readonly string[];
  excludeOutboundCidrs: readonly string[];
}

export type Family = 4 | 6;

export interface RenderOptions {
  /**
   * The table as `iptables-save -t nat` prints it now. Jumps into our chains that it already
   * holds are not appended again, so a rerun (an init container restart) is idempotent:
   * declaring our chains again flushes and refills them under --noflush.
   */
  existing?: string;
}

export const INBOUND_CHAIN = 'OUTRIGGER_INBOUND';
export const OUTPUT_CHAIN = 'OUTRIGGER_OUTPUT';

export function captureSpecFromConfig(c: Config): CaptureSpec {
  return {
    egressPort: c.egressPort,
    ingressPort: c.ingressPort,
    adminPort: c.adminPort,
    meshPort: c.meshPort,
    proxyUid: c.proxyUid,
    excludeInboundPorts: c.excludeInboundPorts,
    excludeOutboundPorts: c.excludeOutboundPorts,
    excludeInboundCidrs: c.excludeInboundCidrs,
    excludeOutboundCidrs: c.excludeOutboundCidrs,
  };
}

/** multiport takes at most 15 ports per rule, and a range counts as two. */
export function multiportChunks(ports: readonly string[]): string[] {
  const chunks: string[][] = [];
  let current: string[] = [];
  let weight = 0;
  for (const p of ports) {
    const w = p.includes(':') ? 2 : 1;
    if (weight + w > 15) {
      chunks.push(current);
      current = [];
      weight = 0;
    }
    current.push(p);
    weight += w;
  }
  if (current.length > 0) chunks.push(current);
  return chunks.map((c) => c.join(','));
}

const comment = (name: string): string => `-m comment --comment "outrigger/${name}"`;

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}

/**
 * Checked again here with the same parser as config loading: a spec built any other way must not
 * write a CIDR the kernel reads differently (a zone, host bits) into the rules.
 */
function ofFamily(
  cidrs: readonly string[],
  family: Family,
  option: 'excludeInboundCidrs' | 'excludeOutboundCidrs',
): string[] {
  const parsed = cidrs.map((c) => {
    try {
      return parseCidr(c);
    } catch (e) {
      if (!(e instanceof CidrError)) throw e;
      throw new OutriggerError(
        'config_invalid',
        `invalid ${options[option].annotation ?? option}: ${e.message}`,
      );
    }
  });
  return unique(parsed.filter((c) => c.family === family).map((c) => c.text));
}

function inboundRules(s: CaptureSpec, family: Family): string[] {
  const c = INBOUND_CHAIN;
  // The admin port stays reachable for kubelet probes and scrapes even if the proxy misbehaves.
  // The mesh port is never redirected: a pod without mutual TLS must refuse it, so that a meshed
  // caller falls back to plaintext instead of handshaking with an app port.
  const ports = unique([String(s.adminPort), String(s.meshPort), ...s.excludeInboundPorts]);
  return [
    ...multiportChunks(ports).map(
      (p) => `-A ${c} -p tcp -m multiport --dports ${p} ${comment('ignore-inbound-ports')} -j RETURN`,
    ),
    ...ofFamily(s.excludeInboundCidrs, family, 'excludeInboundCidrs').map(
      (cidr) => `-A ${c} -s ${cidr} ${comment('ignore-inbound-cidr')} -j RETURN`,
    ),
    `-A ${c} -p tcp ${comment('redirect-inbound')} -j REDIRECT --to-ports ${s.ingressPort}`,
  ];
}

function outputRules(s: CaptureSpec, family: Family): string[] {
  const c = OUTPUT_CHAIN;
  return [
    `-A ${c} -m owner --uid-owner ${s.proxyUid} ${comment('ignore-proxy-uid')} -j RETURN`,
    `-A ${c} -o lo ${comment('ignore-loopback')} -j RETURN`,
    ...multiportChunks(unique(s.excludeOutboundPorts)).map(
      (p) => `-A ${c} -p tcp -m multiport --dports ${p} ${comment('ignore-outbound-ports')} -j RETURN`,
    ),
    ...ofFamily(s.excludeOutboundCidrs, family, 'excludeOutboundCidrs').map(
      (cidr) => `-A ${c} -d ${cidr} ${comment('ignore-outbound-cidr')} -j RETURN`,
    ),
    `-A ${c} -p tcp ${comment('redirect-outbound')} -j REDIRECT --to-ports ${s.egressPort}`,
  ];
}

/** iptables-restore (family 4) or ip6tables-restore (family 6) input, to load with --noflush. */
export function renderRules(s: CaptureSpec, family: Family, opts: RenderOptions = {}): string {
  const lines = [
    `# Generated by outrigger: transparent capture (IPv${family}), load with ${family === 6 ? 'ip6tables' : 'iptables'}-restore --noflush`,
    '*nat',
    `:${INBOUND_CHAIN} - [0:0]`,
    `:${OUTPUT_CHAIN} - [0:0]`,
    ...inboundRules(s, family),
    ...outputRules(s, family),
  ];
  const jumps = [
    `-A PREROUTING -p tcp ${comment('install-prerouting')} -j ${INBOUND_CHAIN}`,
    `-A OUTPUT -p tcp ${comment('install-output')} -j ${OUTPUT_CHAIN}`,
  ];
  lines.push(...jumps.filter((rule) => !hasJump(opts.existing ?? '', rule)));
  lines.push('COMMIT', '');
  return lines.join('\n');
}

/** Whether iptables-save output already holds this jump (it prints the comment unquoted). */
function hasJump(saved: string, rule: string): boolean {
  const [, chain, target] = /^-A (\S+) .* -j (\S+)$/.exec(rule) ?? [];
  return new RegExp(`^-A ${chain} .*-j ${target}\\s*$`, 'm').test(saved);
}
