import { request as httpRequest } from '../shared/node-http.ts';
import { request as httpsRequest } from 'node:https';
import type { KubeConnection } from '../kube/connection.ts';
import { OutriggerError, errorMessage } from '../shared/errors.ts';

/**
 * A few one-off API calls for the CLI (reachability, version, access reviews), through the same
 * kubeconfig loader the sidecar uses out of cluster. Not for watching: discovery does that.
 */
export interface KubeApi {
  /** The API server URL, for messages. */
  readonly server: string;
  readonly kubeconfig: string;
  call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: unknown }>;
}

const TIMEOUT_MS = 5_000;

export async function openKubeApi(kubeconfig: string): Promise<KubeApi & { namespace: string | undefined }> {
  // Loaded on use: @kubernetes/client-node is heavy and only these commands need it.
  const { kubeconfigConnection } = await import('../kube/kubeconfig.ts');
  const conn = await kubeconfigConnection(kubeconfig);
  const server = conn.server.toString().replace(/\/$/, '');
  return {
    server,
    kubeconfig,
    namespace: conn.namespace,
    call: (method, path, body) => send(conn, server, method, path, body),
  };
}

function send(
  conn: KubeConnection,
  server: string,
  method: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: unknown }> {
  const url = new URL(path, conn.server);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const auth = conn.authorization();
  const headers: Record<string, string> = {
    accept: 'application/json',
    ...(auth ? { authorization: auth } : {}),
    ...(payload ? { 'content-type': 'application/json' } : {}),
  };
  const secure = url.protocol === 'https:';
  const tls = secure
    ? {
        ca: conn.ca,
        cert: conn.cert,
        key: conn.key,
        ...(conn.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
      }
    : {};
  return new Promise((resolve, reject) => {
    const req = (secure ? httpsRequest : httpRequest)(
      url,
      { method, headers, ...tls, signal: AbortSignal.timeout(TIMEOUT_MS) },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // Not JSON (a proxy's error page): keep the text for the message.
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
        res.on('error', reject);
      },
    );
    req.on('error', (e) =>
      reject(new OutriggerError('kube_unavailable', `cannot reach the API server ${server} (${reason(e)})`)),
    );
    req.end(payload);
  });
}

/** The useful part of a network error: its code and address, not a stack of wrappers. */
function reason(e: unknown): string {
  if (e instanceof Error && e.name === 'TimeoutError') return `no answer within ${TIMEOUT_MS / 1000}s`;
  return errorMessage(e);
}

/** GET /version: the first thing every command that talks to the API does, so an outage is named at once. */
export async function apiVersion(api: KubeApi): Promise<string> {
  const r = await api.call('GET', '/version');
  if (r.status === 401)
    throw new OutriggerError(
      'kube_unauthorized',
      `the API server ${api.server} rejected the credentials in ${api.kubeconfig} (401 Unauthorized)`,
    );
  const v = r.body as { gitVersion?: unknown } | undefined;
  if (r.status !== 200 || typeof v?.gitVersion !== 'string')
    throw new OutriggerError(
      'kube_bad_response',
      `the API server ${api.server} answered GET /version with ${r.status}: ${JSON.stringify(r.body).slice(0, 200)}`,
    );
  return v.gitVersion;
}
