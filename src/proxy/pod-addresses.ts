import { networkInterfaces } from 'node:os';
import type { Clock } from '../shared/clock.ts';
import { unmapped } from './capture/original-destination.ts';

/**
 * Which addresses are this pod's own, for the transparent ingress check (Linkerd's inbound IPs
 * check): the downward API's pod IP (OUTRIGGER_POD_IP, status.podIP) and every non-loopback
 * address of the pod's interfaces (the other family of a dual-stack pod, which status.podIP does
 * not carry). Loopback never counts: a connection whose original destination is loopback was not
 * sent to the pod from outside.
 */
export interface PodAddressOptions {
  podIPs: readonly string[];
  clock: Clock;
  /** os.networkInterfaces() of the pod's network namespace; replaced in tests. */
  interfaces?: () => Record<string, readonly { address: string; internal: boolean }[] | undefined>;
}

/** Interfaces are re-read on a miss at most this often (an address added after start). */
const REFRESH_MS = 1_000;

export function podAddressCheck(o: PodAddressOptions): (address: string) => boolean {
  const read = o.interfaces ?? networkInterfaces;
  const fixed = new Set(o.podIPs.map(unmapped));
  let known = new Set<string>();
  let readAt = -Infinity;
  const refresh = (): void => {
    readAt = o.clock.now();
    known = new Set(fixed);
    for (const list of Object.values(read()))
      for (const info of list ?? []) if (!info.internal) known.add(unmapped(info.address));
  };
  return (address) => {
    const a = unmapped(address);
    if (known.has(a)) return !isLoopback(a);
    if (o.clock.now() - readAt < REFRESH_MS) return false;
    refresh();
    return known.has(a) && !isLoopback(a);
  };
}

function isLoopback(a: string): boolean {
  return a === '::1' || a.startsWith('127.');
}
