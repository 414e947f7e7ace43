import { request as httpRequest } from '../shared/node-http.ts';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import type { AppProbe } from '../config/parse.ts';
import { grpcHealthCheck, type ProbeOutcome } from './grpc-health.ts';

export type { ProbeOutcome };

/** Answers `/app-health/...` paths; undefined for a path that names no probe (404). */
export type AppHealth = (path: string) => Promise<ProbeOutcome> | undefined;

/**
 * Kubelet's probes of an app whose pod refuses plaintext (outrigger.dev/mtls: strict): the
 * injector points them at `/app-health/<container>/<kind>` on the admin port, and the sidecar
 * replays the original probe against the app inside the pod. Kubelet's rules: an HTTP status from
 * 200 to 399 passes (certificates are not checked for HTTPS), a TCP probe passes when it connects,
 * a gRPC probe when the standard health check answers SERVING. Each waits for the probe's own
 * timeout (timeoutSeconds, else `timeoutMs`, kubelet's default of 1 s).
 */
export function appHealth(
  probes: Readonly<Record<string, AppProbe>>,
  host: string,
  timeoutMs = 1_000,
): AppHealth {
  return (path) => {
    const p = probes[path];
    if (!p) return undefined;
    const wait = p.timeoutMs ?? timeoutMs;
    if (p.grpc) return grpcHealthCheck(host, p.port, p.grpc.service ?? '', wait);
    return p.path === undefined ? tcpProbe(host, p.port, wait) : httpProbe(host, p, wait);
  };
}

function tcpProbe(host: string, port: number, timeoutMs: number): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.setTimeout(timeoutMs, () => {
      resolve({ ok: false, reason: `no connection within ${timeoutMs} ms` });
      s.destroy();
    });
    s.once('connect', () => (s.destroy(), resolve({ ok: true, reason: 'connected' })));
    s.once('error', (e: NodeJS.ErrnoException) =>
      resolve({ ok: false, reason: `connect failed: ${e.code ?? e.message}` }),
    );
  });
}

function httpProbe(host: string, p: AppProbe, timeoutMs: number): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    const send = p.scheme === 'HTTPS' ? httpsRequest : httpRequest;
    const req = send(
      {
        host,
        port: p.port,
        path: p.path,
        headers: { 'user-agent': 'kube-probe/outrigger', ...p.headers },
        timeout: timeoutMs,
        ...(p.scheme === 'HTTPS' ? { rejectUnauthorized: false } : {}),
      },
      (res) => {
        res.resume();
        const status = res.statusCode ?? 0;
        resolve({ ok: status >= 200 && status < 400, reason: `HTTP status ${status}` });
      },
    );
    req.on('timeout', () => {
      resolve({ ok: false, reason: `no answer within ${timeoutMs} ms` });
      req.destroy();
    });
    req.on('error', (e: NodeJS.ErrnoException) =>
      resolve({ ok: false, reason: `request failed: ${e.code ?? e.message}` }),
    );
    req.end();
  });
}
