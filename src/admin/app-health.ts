import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import type { AppProbe } from '../config/parse.ts';

/**
 * Kubelet's probes of an app whose pod refuses plaintext (outrigger.dev/mtls: strict): the
 * injector points them at `/app-health/<container>/<kind>` on the admin port, and the sidecar
 * replays the original probe against the app inside the pod. Kubelet's rules: an HTTP status from
 * 200 to 399 passes (certificates are not checked for HTTPS), a TCP probe passes when it connects.
 * The answer is 200 or 503; unknown paths are 404.
 */
export function appHealth(
  probes: Readonly<Record<string, AppProbe>>,
  host: string,
  timeoutMs = 1_000,
): (path: string) => Promise<number> | undefined {
  return (path) => {
    const p = probes[path];
    if (!p) return undefined;
    return (p.path === undefined ? tcpProbe(host, p.port, timeoutMs) : httpProbe(host, p, timeoutMs)).then(
      (ok) => (ok ? 200 : 503),
    );
  };
}

function tcpProbe(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.setTimeout(timeoutMs, () => (s.destroy(), resolve(false)));
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

function httpProbe(host: string, p: AppProbe, timeoutMs: number): Promise<boolean> {
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
        resolve(status >= 200 && status < 400);
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}
