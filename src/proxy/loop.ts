import { lookup } from 'node:dns/promises';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { isIP } from 'node:net';
import type { Random } from '../shared/clock.ts';
import { isLocalAddress, unmapped } from './capture/original-destination.ts';

/**
 * The loop guard. A destination is refused when the address it really is (not how it is spelled)
 * is this host's and its port is one of the sidecar's own listeners; and the egress listener
 * marks each request it forwards with a per-process token, so a request that leaves and comes
 * back (through a relay, NAT or a name resolved differently at connect time) is refused at its
 * second pass.
 */
export const HOP_HEADER = 'x-outrigger-via';

/** A per-process token; two sidecars in a row (egress of one pod, ingress of the next) differ. */
export function hopToken(random: Random): string {
  return Math.floor(random() * 0x1_0000_0000)
    .toString(16)
    .padStart(8, '0');
}

/** Whether this egress listener already forwarded the request once. */
export function seenBefore(headers: IncomingHttpHeaders, token: string): boolean {
  const v = headers[HOP_HEADER];
  if (v === undefined) return false;
  return String(v)
    .split(',')
    .some((t) => t.trim() === token);
}

/** Adds this listener's token to the upstream request's marker. */
export function markHop(headers: OutgoingHttpHeaders, token: string): void {
  const prior = headers[HOP_HEADER];
  headers[HOP_HEADER] = prior === undefined ? token : `${String(prior)}, ${token}`;
}

/**
 * The canonical text of an IP literal in any form a resolver accepts (`2130706433`, `0x7f.1`,
 * `127.1`, `0`, `::ffff:7f00:1`, with or without brackets); undefined for a name.
 */
export function ipLiteral(host: string): string | undefined {
  const h = host.replace(/^\[(.*)\]$/, '$1');
  if (isIP(h) === 6) return unmapped(new URL(`http://[${h}]/`).hostname.slice(1, -1));
  if (isIP(h) === 4) return h;
  // The URL parser reads IPv4 in the same shorthand forms as inet_aton(), which getaddrinfo uses.
  try {
    const parsed = new URL(`http://${h}/`).hostname;
    return isIP(parsed) === 4 ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** This host: loopback, the unspecified address (connecting to it reaches loopback) or an interface. */
export function isSelfAddress(address: string): boolean {
  const a = unmapped(address);
  return a === '0.0.0.0' || a === '::' || isLocalAddress(a);
}

/**
 * Whether host:port is one of our own listeners. A name is resolved only when the port is one of
 * ours, so ordinary requests pay no lookup; an unresolvable name is no loop (its connect fails).
 */
export async function isOwnDestination(
  host: string,
  port: number,
  ownPorts: ReadonlySet<number>,
): Promise<boolean> {
  const now = isOwnDestinationNow(host, port, ownPorts);
  if (now !== undefined) return now;
  try {
    const all = await lookup(host, { all: true });
    return all.some((a) => isSelfAddress(a.address));
  } catch {
    return false;
  }
}

/** isOwnDestination() without a lookup: undefined when the answer needs one (a name on our port). */
export function isOwnDestinationNow(
  host: string,
  port: number,
  ownPorts: ReadonlySet<number>,
): boolean | undefined {
  if (!ownPorts.has(port)) return false;
  const literal = ipLiteral(host);
  return literal === undefined ? undefined : isSelfAddress(literal);
}
