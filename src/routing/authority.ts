import { isIP } from 'node:net';
import type { ServiceKey } from '../discovery/types.ts';

/**
 * Parses request authorities into cluster Service names (docs/discovery.md,
 * "Names"). Pure functions; the Router asks discovery
 * whether a parsed name really exists.
 */
export interface HostPort {
  /** Lower-cased, without brackets or a trailing dot. */
  host: string;
  port?: number;
}

/** Splits "host", "host:port", "[v6]" or "[v6]:port"; undefined when malformed. */
export function splitHostPort(authority: string): HostPort | undefined {
  const a = authority.trim();
  if (a === '') return undefined;
  let host: string;
  let portText: string | undefined;
  if (a.startsWith('[')) {
    const close = a.indexOf(']');
    if (close < 0) return undefined;
    host = a.slice(1, close);
    const rest = a.slice(close + 1);
    if (rest !== '' && !rest.startsWith(':')) return undefined;
    portText = rest === '' ? undefined : rest.slice(1);
    if (isIP(host) !== 6) return undefined;
  } else {
    const colon = a.lastIndexOf(':');
    if (colon >= 0 && a.indexOf(':') !== colon) {
      // A bare IPv6 literal without brackets has no port.
      return isIP(a) === 6 ? { host: a.toLowerCase() } : undefined;
    }
    host = colon >= 0 ? a.slice(0, colon) : a;
    portText = colon >= 0 ? a.slice(colon + 1) : undefined;
  }
  host = host.toLowerCase().replace(/\.$/, '');
  if (host === '' || !/^[a-z0-9.:_-]+$/.test(host)) return undefined;
  if (portText === undefined) return { host };
  if (!/^\d{1,5}$/.test(portText)) return undefined;
  const port = Number(portText);
  return port >= 1 && port <= 65535 ? { host, port } : undefined;
}

export interface ServiceName {
  key: ServiceKey;
  /** Set for `<hostname>.<svc>.<ns>.svc[.<domain>]`: one endpoint of a headless Service. */
  hostname?: string;
}

const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const validLabels = (labels: string[]): boolean => labels.every((l) => l.length <= 63 && LABEL.test(l));

/**
 * `svc`, `svc.ns`, `svc.ns.svc`, `svc.ns.svc.<domain>`, `host.svc.ns.svc[.<domain>]` (and
 * `host.svc.ns`, which the pod's resolv.conf search list also resolves). Anything else, including
 * IP literals, is not a cluster Service name.
 */
export function parseServiceName(
  host: string,
  ownNamespace: string,
  clusterDomain: string,
): ServiceName | undefined {
  if (isIP(host) !== 0) return undefined;
  const domain = '.' + clusterDomain.toLowerCase().replace(/^\.|\.$/g, '');
  let name = host.toLowerCase().replace(/\.$/, '');
  const qualified = name.endsWith(domain);
  if (qualified) name = name.slice(0, -domain.length);
  const labels = name.split('.');
  if (!validLabels(labels)) return undefined;
  const [a = '', b = '', c = '', d = ''] = labels;
  if (qualified) {
    if (labels.length === 3 && c === 'svc') return { key: { namespace: b, name: a } };
    if (labels.length === 4 && d === 'svc') return { key: { namespace: c, name: b }, hostname: a };
    return undefined;
  }
  switch (labels.length) {
    case 1:
      return { key: { namespace: ownNamespace, name: a } };
    case 2:
      return { key: { namespace: b, name: a } };
    case 3:
      return c === 'svc'
        ? { key: { namespace: b, name: a } }
        : { key: { namespace: c, name: b }, hostname: a };
    case 4:
      return d === 'svc' ? { key: { namespace: c, name: b }, hostname: a } : undefined;
    default:
      return undefined;
  }
}
