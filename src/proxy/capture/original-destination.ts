// Transparent capture: after an iptables REDIRECT the accepted socket's local address is our own
// listener; the destination the app dialled is kept by conntrack and read back with
// getsockopt(SO_ORIGINAL_DST). Node has no getsockopt, so libc's is called through koffi (FFI,
// prebuilt, no compiler at install time) on the socket's kernel descriptor.
import { createRequire } from 'node:module';
import { isIPv4, isIPv6, type Socket } from 'node:net';
import { endianness, networkInterfaces } from 'node:os';
import type * as Koffi from 'koffi';
import type { Destination, OriginalDestination } from '../capture-port.ts';

export type { Destination };

/** One of the proxy's own listeners; a missing or wildcard address means every local address. */
export interface Listener {
  address?: string;
  port: number;
}

const SOL_IP = 0;
const SOL_IPV6 = 41;
const SO_ORIGINAL_DST = 80; // linux/netfilter_ipv4.h
const IP6T_SO_ORIGINAL_DST = 80; // linux/netfilter_ipv6/ip6_tables.h
const AF_INET = 2;
const AF_INET6 = 10;
const SOCKADDR_MAX = 28; // sizeof(struct sockaddr_in6)

type GetSockOpt = (fd: number, level: number, name: number, out: Buffer, len: number[]) => number;

let getsockopt: GetSockOpt | null | undefined;

/** Loaded on first use so explicit mode (and non-Linux development machines) never load koffi. */
function loadGetSockOpt(): GetSockOpt | null {
  if (getsockopt !== undefined) return getsockopt;
  if (process.platform !== 'linux') return (getsockopt = null);
  const koffi = createRequire(import.meta.url)('koffi') as typeof Koffi;
  const libc = koffi.load('libc.so.6');
  const fn = libc.func('int getsockopt(int, int, int, _Out_ uint8_t *buf, _Inout_ uint32_t *len)');
  getsockopt = (fd, level, name, out, len) => fn(fd, level, name, out, len) as number;
  return getsockopt;
}

/** The kernel descriptor of a connected TCP socket; undocumented in Node, -1 or absent elsewhere. */
function fdOf(socket: Socket): number | undefined {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/** Turns an IPv4-mapped IPv6 address (dotted or hex form) into plain IPv4; others unchanged. */
export function unmapped(address: string): string {
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (dotted) return dotted[1] ?? address;
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (!hex) return address;
  const [hi, lo] = [parseInt(hex[1] ?? '', 16), parseInt(hex[2] ?? '', 16)];
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
}

/** Decodes a struct sockaddr_in / sockaddr_in6 as the kernel wrote it. */
export function decodeSockaddr(buf: Buffer): Destination | undefined {
  const family = endianness() === 'LE' ? buf.readUInt16LE(0) : buf.readUInt16BE(0);
  const port = buf.readUInt16BE(2);
  if (family === AF_INET) return { address: [...buf.subarray(4, 8)].join('.'), port };
  if (family === AF_INET6) {
    const groups: string[] = [];
    for (let i = 8; i < 24; i += 2) groups.push(buf.readUInt16BE(i).toString(16));
    // The URL parser gives the canonical RFC 5952 text (compressed zeros, lower case).
    return { address: unmapped(new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1)), port };
  }
  return undefined;
}

const cache = new WeakMap<Socket, Destination | null>();

/**
 * The destination the app originally dialled, for a socket accepted after an iptables REDIRECT;
 * undefined when there is none to read (no conntrack entry, a closed socket, not Linux).
 * Beware: with NAT loaded, a connection that was NOT redirected returns its own local address,
 * so callers must apply isOwnListener() before forwarding.
 */
export const originalDestination: OriginalDestination = (socket: Socket) => {
  // Fixed for the life of a connection; keep-alive requests on it must not pay the syscall again.
  const known = cache.get(socket);
  if (known !== undefined) return known ?? undefined;
  const dest = lookup(socket);
  if (fdOf(socket) !== undefined) cache.set(socket, dest ?? null);
  return dest;
};

function lookup(socket: Socket): Destination | undefined {
  const fd = fdOf(socket);
  const call = loadGetSockOpt();
  if (fd === undefined || call === null) return undefined;
  // The IPv6 call only for real IPv6 peers: IPv4-mapped ones on a dual-stack listener are IPv4 flows.
  const local = socket.localAddress ?? '';
  const v6 = isIPv6(local) && !isIPv4(unmapped(local));
  const buf = Buffer.alloc(SOCKADDR_MAX);
  const len = [SOCKADDR_MAX];
  const rc = call(fd, v6 ? SOL_IPV6 : SOL_IP, v6 ? IP6T_SO_ORIGINAL_DST : SO_ORIGINAL_DST, buf, len);
  return rc === 0 ? decodeSockaddr(buf) : undefined;
}

const WILDCARDS = new Set(['', '0.0.0.0', '::']);

function isLoopback(address: string): boolean {
  return address === '::1' || (isIPv4(address) && address.startsWith('127.'));
}

/** Whether an address is assigned to this network namespace (loopback or any interface). */
export function isLocalAddress(address: string): boolean {
  const a = unmapped(address);
  if (isLoopback(a)) return true;
  for (const list of Object.values(networkInterfaces()))
    for (const info of list ?? []) if (unmapped(info.address) === a) return true;
  return false;
}

/**
 * The loop guard: a destination equal to one of our own listeners must be refused. Without it a
 * connection that reached a listener directly (not redirected) looks like a request for that
 * listener, and forwarding it, as the proxy's exempt UID, connects to ourselves forever.
 */
export function isOwnListener(
  dest: Destination,
  listeners: readonly Listener[],
  isLocal: (address: string) => boolean = isLocalAddress,
): boolean {
  const address = unmapped(dest.address);
  return listeners.some((l) => {
    if (l.port !== dest.port) return false;
    const bound = unmapped(l.address ?? '');
    return WILDCARDS.has(bound) ? isLocal(address) : bound === address;
  });
}
