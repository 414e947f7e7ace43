import { isIP } from 'node:net';

/** Why a CIDR was refused; the config parser adds the key and what is allowed. */
export class CidrError extends Error {}

export interface Cidr {
  family: 4 | 6;
  /** Canonical text: IPv4 as dotted quad, IPv6 in RFC 5952 form, then /prefix. */
  text: string;
}

const DECIMAL = /^(0|[1-9]\d{0,2})$/;

/**
 * The one strict reading of a CIDR, shared by config loading (flags, environment, annotations),
 * the webhook and the iptables step, so what the webhook admits is exactly what iptables gets.
 * Refused: zone indexes (`fe80::1%eth0`, meaningless in a rule), prefix lengths that are missing,
 * out of range or not plain decimal, leading zeros in IPv4 octets, IPv4-mapped IPv6 addresses
 * (ip6tables never sees IPv4 traffic) and set host bits (`10.1.2.3/8` is ambiguous: it names
 * 10.0.0.0/8 to iptables, though the writer probably meant one host).
 */
export function parseCidr(raw: string): Cidr {
  const text = raw.trim();
  const parts = text.split('/');
  if (parts.length > 2) throw new CidrError(`${JSON.stringify(text)}: one "/" between address and prefix`);
  const [address = '', bits] = parts;
  if (address.includes('%'))
    throw new CidrError(`${JSON.stringify(text)}: a zone index (%...) is not allowed in a CIDR`);
  const family = familyOf(address);
  if (family === 0)
    throw new CidrError(`${JSON.stringify(text)}: ${JSON.stringify(address)} is not an IP address`);
  const max = family === 4 ? 32 : 128;
  if (bits === undefined || !DECIMAL.test(bits) || Number(bits) > max)
    throw new CidrError(`${JSON.stringify(text)}: the prefix length must be /0 to /${max}`);
  const prefix = Number(bits);
  const value = family === 4 ? v4Value(address) : v6Value(address);
  if (family === 6 && value >> 32n === 0xffffn)
    throw new CidrError(`${JSON.stringify(text)}: an IPv4-mapped address; write it in its IPv4 form`);
  const width = BigInt(max);
  const hostMask = (1n << (width - BigInt(prefix))) - 1n;
  const network = value & ~hostMask;
  const canonical = `${family === 4 ? v4Text(network) : v6Text(network)}/${prefix}`;
  if (network !== value)
    throw new CidrError(`${JSON.stringify(text)}: host bits are set; the network is ${canonical}`);
  return { family, text: canonical };
}

function familyOf(address: string): 0 | 4 | 6 {
  const f = isIP(address);
  if (f !== 4) return f as 0 | 6;
  // Node accepts what inet_pton does; leading zeros read as octal by some tools are refused.
  return address.split('.').every((o) => DECIMAL.test(o)) ? 4 : 0;
}

function v4Value(address: string): bigint {
  return address.split('.').reduce((acc, o) => (acc << 8n) | BigInt(o), 0n);
}

function v6Value(address: string): bigint {
  let text = address.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    const v4 = v4Value(dotted[1]);
    text = text.slice(0, -dotted[1].length) + `${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(`0x${g}`), 0n);
}

function v4Text(v: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((v >> s) & 0xffn)).join('.');
}

/** RFC 5952: lower case, no leading zeros, the longest run of two or more zero groups as "::". */
function v6Text(v: bigint): string {
  const groups = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((s) => ((v >> s) & 0xffffn).toString(16));
  let best = { at: -1, len: 1 };
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > best.len) best = { at: i, len: j - i };
    i = j === i ? i + 1 : j;
  }
  if (best.at < 0) return groups.join(':');
  return `${groups.slice(0, best.at).join(':')}::${groups.slice(best.at + best.len).join(':')}`;
}
