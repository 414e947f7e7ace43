import { Agent, request } from 'node:https';
import type { KubeConnection } from './connection.ts';
import { tlsOptions } from './senders.ts';

export interface JsonResponse {
  status: number;
  text: string;
}

/**
 * Single JSON requests (create, replace, TokenReview) on a keep-alive agent, the credentials read
 * per request. After a 401 the credentials are refreshed and the request is sent once more.
 * Network failures reject with the raw error; statuses are the caller's to judge.
 */
export function jsonClient(
  conn: KubeConnection,
  maxBytes: number,
): {
  send(method: string, path: string, body: unknown, signal: AbortSignal): Promise<JsonResponse>;
  close(): void;
} {
  const agent = new Agent({ keepAlive: true, maxFreeSockets: 4, ...tlsOptions(conn) });
  const once = (method: string, path: string, body: string, signal: AbortSignal): Promise<JsonResponse> =>
    new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        accept: 'application/json',
        'user-agent': 'outrigger/0.1',
      };
      const auth = conn.authorization();
      if (auth) headers.authorization = auth;
      const req = request(new URL(path, conn.server), { method, agent, headers, signal }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > maxBytes) res.destroy(new Error(`${path}: response larger than ${maxBytes} bytes`));
          else chunks.push(c);
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  return {
    async send(method, path, payload, signal) {
      const body = JSON.stringify(payload);
      const res = await once(method, path, body, signal);
      if (res.status === 401 && (await conn.unauthorized())) return once(method, path, body, signal);
      return res;
    },
    close: () => agent.destroy(),
  };
}
