import type { AppProbe } from '../config/parse.ts';
import type { Container, PatchOp } from './types.ts';

/**
 * Under outrigger.dev/mtls: strict the sidecar refuses plaintext from other pods, and kubelet's
 * probes are plaintext from the node. So, as Istio does, the app's HTTP and TCP probes are
 * rewritten to the sidecar's admin port (`/app-health/<container>/<kind>`), which replays the
 * original probe against the app from inside the pod. The originals travel to the sidecar as JSON
 * in OUTRIGGER_APP_PROBES. gRPC and exec probes are left as they are (exec runs in the container;
 * gRPC is named in the docs as not rewritten).
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
      const http = spec.httpGet;
      const port = portOf(c, http ? http.port : spec.tcpSocket?.port);
      if (port === undefined || port === adminPort || (!http && !spec.tcpSocket)) continue;
      const path = `/app-health/${c.name}/${kind}`;
      probes[path] = http
        ? {
            port,
            path: http.path ?? '/',
            ...(http.scheme === 'HTTPS' ? { scheme: 'HTTPS' as const } : {}),
            ...(http.httpHeaders?.length
              ? { headers: Object.fromEntries(http.httpHeaders.map((h) => [h.name, h.value])) }
              : {}),
          }
        : { port };
      const { httpGet: _h, tcpSocket: _t, ...rest } = spec;
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
