import { createHash } from 'node:crypto';
import { routeKey, type Gateway } from '../routes/objects.ts';
import { byAge } from './table.ts';

/**
 * An address per Gateway. Every Gateway of our class gets a Service of its own in the gateway's
 * namespace, in front of the same gateway pods; each of the Gateway's listener ports maps to a pod
 * port that the gateway process opens for that Gateway and that port alone, so that a request
 * that came to a Gateway's address is matched against that Gateway's listeners only.
 *
 * The pod ports are a pure function of the Gateways (a hash of Gateway and listener port into a
 * fixed range, the older Gateway keeping a port two of them hash to), so every replica opens the
 * same ports without asking the others, and the Service's targetPorts agree with them.
 */
export interface Binding {
  /** The Gateway, "namespace/name". */
  gateway: string;
  /** The listener port (the Service's port). */
  port: number;
  protocol: 'HTTP' | 'HTTPS';
  /** The port the gateway pods listen on for this Gateway and listener port. */
  podPort: number;
}

/** Pod ports for Gateways: clear of the gateway's own ports (8080, 8443, 7402) and the ephemeral range. */
export const POD_PORT_BASE = 20_000;
export const POD_PORT_SPAN = 10_000;

const PROTOCOLS: ReadonlySet<string> = new Set(['HTTP', 'HTTPS']);

/** The bindings of every Gateway; the older of two Gateways keeps a pod port both hash to. */
export function assignPodPorts(gateways: Iterable<Gateway>): Binding[] {
  const taken = new Set<number>();
  const out: Binding[] = [];
  for (const g of [...gateways].sort(byAge)) {
    const key = routeKey(g.metadata);
    for (const { port, protocol } of listenerPorts(g)) {
      let podPort = POD_PORT_BASE + (hash(`${key}:${port}`) % POD_PORT_SPAN);
      while (taken.has(podPort)) podPort = POD_PORT_BASE + ((podPort - POD_PORT_BASE + 1) % POD_PORT_SPAN);
      taken.add(podPort);
      out.push({ gateway: key, port, protocol, podPort });
    }
  }
  return out;
}

/** A Gateway's served ports; of two listeners on one port with different protocols, the first's. */
function listenerPorts(g: Gateway): { port: number; protocol: Binding['protocol'] }[] {
  const by = new Map<number, Binding['protocol']>();
  for (const l of g.spec.listeners)
    if (PROTOCOLS.has(l.protocol) && !by.has(l.port)) by.set(l.port, l.protocol as Binding['protocol']);
  return [...by].map(([port, protocol]) => ({ port, protocol }));
}

const hash = (s: string): number => createHash('sha256').update(s).digest().readUInt32BE(0);

/**
 * The Service of a Gateway, as Envoy Gateway names its own: "outrigger-<namespace>-<name>-<hash>",
 * cut to the API's 63 characters; the hash of "namespace/name" keeps two Gateways apart whose
 * names would otherwise read the same ("a-b" in "c", "a" in "b-c").
 */
export function serviceName(gateway: string): string {
  const [namespace = '', name = ''] = gateway.split('/');
  const digest = createHash('sha256').update(gateway).digest('hex').slice(0, 8);
  const readable = `outrigger-${namespace}-${name}`.replace(/\./g, '-').slice(0, 54).replace(/-+$/, '');
  return `${readable}-${digest}`;
}

/** Labels on each Gateway's Service: the Gateway it serves, for `kubectl get svc -l`. */
export const GATEWAY_NAME_LABEL = 'gateway.networking.k8s.io/gateway-name';
export const GATEWAY_NAMESPACE_LABEL = 'gateway.outrigger.dev/gateway-namespace';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'outrigger-gateway';

/** The Service object server-side applied for a Gateway's bindings. */
export function serviceFor(
  gateway: string,
  bindings: readonly Binding[],
  where: { namespace: string; selector: Readonly<Record<string, string>> },
): Record<string, unknown> {
  const [namespace = '', name = ''] = gateway.split('/');
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: serviceName(gateway),
      namespace: where.namespace,
      labels: {
        [MANAGED_BY_LABEL]: MANAGED_BY,
        [GATEWAY_NAME_LABEL]: name.slice(0, 63).replace(/[^a-z0-9]+$/, ''),
        [GATEWAY_NAMESPACE_LABEL]: namespace,
      },
    },
    // No type: ClusterIP by default, and a user who makes it a LoadBalancer keeps it so.
    spec: {
      selector: where.selector,
      ports: bindings.map((b) => ({
        name: `${b.protocol.toLowerCase()}-${b.port}`,
        port: b.port,
        targetPort: b.podPort,
        protocol: 'TCP',
      })),
    },
  };
}
