import type { AppProbe } from '../config/parse.ts';
import type { Container, PatchOp } from './types.ts';

/**
 * Under outrigger.dev/mtls: strict the sidecar refuses plaintext from other pods, and kubelet's
 * probes are plaintext from the node. So, as Istio does, the app's HTTP, TCP and gRPC probes are
 * rewritten to the sidecar's admin port (`/app-health/<container>/<kind>`) as HTTP probes, and the
 * sidecar replays the original probe against the app from inside the pod. The originals travel to
 * the sidecar as JSON in OUTRIGGER_APP_PROBES, with their timeout. exec probes run in the
 * container and are left as they are.
 */
const KINDS = [
  ['livenessProbe', 'livez'],
  ['readinessProbe', 'readyz'],
  ['startupProbe', 'startupz'],
] as const;

interface ProbeSpec {
  httpGet?: {
    path?: string;
    port?: number | string;
    scheme?: string;
    httpHeaders?: { name: string; value: string }[];
  };
  tcpSocket?: { port?: number | string };
  /** Kubernetes 1.24+: the port is a number (no names), the service optional. */
  grpc?: { port?: number; service?: string };
  timeoutSeconds?: number;
  [k: string]: unknown;
}

function portOf(c: Container, port: number | string | undefined): number | undefined {
  if (typeof port === 'number') return port;
  if (typeof port === 'string' && /^\d+$/.test(port)) return Number(port);
  return c.ports?.find((p) => p.name === port)?.containerPort;
}

export function rewriteProbes(
  containers: readonly Container[],
  adminPort: number,
): { ops: PatchOp[]; probes: Record<string, AppProbe> } {
  const ops: PatchOp[] = [];
  const probes: Record<string, AppProbe> = {};
  containers.forEach((c, i) => {
    for (const [field, kind] of KINDS) {
      const spec = c[field] as ProbeSpec | undefined;
      if (!spec) continue;
      const original = replayed(c, spec);
      if (!original || original.port === adminPort) continue;
      const path = `/app-health/${c.name}/${kind}`;
      probes[path] = original;
      const { httpGet: _h, tcpSocket: _t, grpc: _g, ...rest } = spec;
      // `add` on an existing member replaces it (RFC 6902 section 4.1): the timings stay, the handler changes.
      ops.push({
        op: 'add',
        path: `/spec/containers/${i}/${field}`,
        value: { ...rest, httpGet: { path, port: adminPort, scheme: 'HTTP' } },
      });
    }
  });
  return { ops, probes };
}

/** What the sidecar replays for one probe: undefined for exec probes and unknown named ports. */
function replayed(c: Container, spec: ProbeSpec): AppProbe | undefined {
  const timeout = spec.timeoutSeconds ? { timeoutMs: spec.timeoutSeconds * 1000 } : {};
  const http = spec.httpGet;
  if (http) {
    const port = portOf(c, http.port);
    return port === undefined
      ? undefined
      : {
          port,
          path: http.path ?? '/',
          ...(http.scheme === 'HTTPS' ? { scheme: 'HTTPS' as const } : {}),
          ...(http.httpHeaders?.length
            ? { headers: Object.fromEntries(http.httpHeaders.map((h) => [h.name, h.value])) }
            : {}),
          ...timeout,
        };
  }
  if (spec.grpc) {
    const port = portOf(c, spec.grpc.port);
    return port === undefined ? undefined : { port, grpc: { service: spec.grpc.service ?? '' }, ...timeout };
  }
  if (spec.tcpSocket) {
    const port = portOf(c, spec.tcpSocket.port);
    return port === undefined ? undefined : { port, ...timeout };
  }
  return undefined;
}
