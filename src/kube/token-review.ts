import { errorMessage } from '../shared/errors.ts';
import { errorForStatus, KubeError } from './api.ts';
import type { KubeConnection } from './connection.ts';
import { jsonClient } from './json-client.ts';

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
 * Creates TokenReviews for `outrigger identity` (RBAC: create tokenreviews). A keep-alive agent,
 * since every certificate costs one review. After a 401 the issuer's own credentials are
 * refreshed and the review is sent once more.
 */
export function tokenReviewer(conn: KubeConnection): {
  review(token: string, audiences: readonly string[], signal: AbortSignal): Promise<TokenReviewStatus>;
  close(): void;
} {
  const client = jsonClient(conn, MAX_BYTES);
  return {
    async review(token, audiences, signal) {
      const body = {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenReview',
        spec: { token, audiences },
      };
      let res;
      try {
        res = await client.send('POST', PATH, body, signal);
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
    close: () => client.close(),
  };
}
