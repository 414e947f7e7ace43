import { Agent, request } from 'node:https';
import { errorMessage } from '../../shared/errors.ts';
import { errorForStatus, KubeError } from './api.ts';
import type { KubeConnection } from './connection.ts';
import { tlsOptions } from './senders.ts';

/** What the API server says about a token (authentication.k8s.io/v1 TokenReview status). */
export interface TokenReviewStatus {
  authenticated: boolean;
  username?: string;
  audiences?: string[];
  extra?: Record<string, string[]>;
  error?: string;
}

const PATH = '/apis/authentication.k8s.io/v1/tokenreviews';
const MAX_BYTES = 64 * 1024;

/**
 * Creates TokenReviews for `outrigger identity` (RBAC: create tokenreviews, nothing else). A
 * keep-alive agent, since every certificate costs one review. After a 401 the issuer's own
 * credentials are refreshed and the review is sent once more.
 */
export function tokenReviewer(conn: KubeConnection): {
  review(token: string, audiences: readonly string[], signal: AbortSignal): Promise<TokenReviewStatus>;
  close(): void;
} {
  const agent = new Agent({ keepAlive: true, maxFreeSockets: 4, ...tlsOptions(conn) });
  const send = (body: string, signal: AbortSignal): Promise<{ status: number; text: string }> =>
    new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        accept: 'application/json',
        'user-agent': 'outrigger/0.1',
      };
      const auth = conn.authorization();
      if (auth) headers.authorization = auth;
      const req = request(new URL(PATH, conn.server), { method: 'POST', agent, headers, signal }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_BYTES) res.destroy(new Error(`TokenReview response larger than ${MAX_BYTES} bytes`));
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
    async review(token, audiences, signal) {
      const body = JSON.stringify({
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenReview',
        spec: { token, audiences },
      });
      let res;
      try {
        res = await send(body, signal);
        if (res.status === 401 && (await conn.unauthorized())) res = await send(body, signal);
      } catch (e) {
        throw new KubeError('kube_unavailable', `${PATH}: ${errorMessage(e)}`, undefined, { cause: e });
      }
      if (res.status !== 201 && res.status !== 200)
        throw errorForStatus(res.status, PATH, res.text.slice(0, 200));
      let parsed: {
        status?: Partial<TokenReviewStatus> & {
          user?: { username?: string; extra?: Record<string, string[]> };
        };
      };
      try {
        parsed = JSON.parse(res.text) as typeof parsed;
      } catch {
        throw new KubeError('kube_bad_response', `${PATH}: response is not JSON`);
      }
      const s = parsed.status ?? {};
      return {
        authenticated: s.authenticated === true,
        ...(s.user?.username ? { username: s.user.username } : {}),
        ...(Array.isArray(s.audiences) ? { audiences: s.audiences } : {}),
        ...(s.user?.extra ? { extra: s.user.extra } : {}),
        ...(s.error ? { error: s.error } : {}),
      };
    },
    close: () => agent.destroy(),
  };
}
