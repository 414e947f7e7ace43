import type { IssuingCa } from '../../src/mesh/ca.ts';
import type { TokenReviewer, TokenReviewResult } from '../../src/mesh/issuer.ts';
import { selfSignedCa } from '../../src/mesh/x509.ts';

/** A self-signed P-256 root valid for a year around `now`, shaped as the issuer loads one. */
export async function testCa(now = Date.now(), name = 'outrigger test ca'): Promise<IssuingCa> {
  const notAfter = now + 365 * 24 * 3600_000;
  const signer = await selfSignedCa(name, new Date(now - 3600_000), new Date(notAfter));
  return { signer, chain: [], trustBundle: signer.certPem, notAfter };
}

/** A TokenReview API answering from a table of tokens; counts the reviews it was asked for. */
export class FakeReviewer implements TokenReviewer {
  readonly tokens = new Map<string, TokenReviewResult>();
  calls = 0;
  failWith: Error | undefined;

  review(token: string, audiences: readonly string[]): Promise<TokenReviewResult> {
    this.calls++;
    if (this.failWith) return Promise.reject(this.failWith);
    const r = this.tokens.get(token);
    if (!r) return Promise.resolve({ authenticated: false, error: 'invalid bearer token' });
    const ok = (r.audiences ?? []).some((a) => audiences.includes(a));
    return Promise.resolve(ok ? r : { authenticated: false, error: 'token audiences are invalid' });
  }

  /** A pod-bound token of system:serviceaccount:<ns>:<sa> for the given audience. */
  podToken(token: string, ns: string, sa: string, audience = 'outrigger-identity'): string {
    this.tokens.set(token, {
      authenticated: true,
      username: `system:serviceaccount:${ns}:${sa}`,
      audiences: [audience],
      extra: {
        'authentication.kubernetes.io/pod-name': [`${sa}-pod`],
        'authentication.kubernetes.io/pod-uid': ['uid-1'],
      },
    });
    return token;
  }
}
