import { X509Certificate } from 'node:crypto';
import { EXPIRY_WARN_MS, fail, pass, warn, type CheckResult } from './check-result.ts';
import { CONTROL_PLANE, madeByInstall } from './control-plane.ts';
import type { KubeApi } from './kube-api.ts';

/**
 * The mesh certificate issuer's signing CA (Secret outrigger-identity-ca, from install --identity
 * or scripts/gen-mesh-ca), when mutual TLS is installed: an expired CA signs certificates no
 * sidecar accepts, so every strict pod loses its callers as their certificates renew. Not
 * installed is no failure. The advice replaces the CA only, never the install's shape.
 */
const SECRET = CONTROL_PLANE.identity.caSecret;
const RESTART = `kubectl apply -f DIR/manifests.yaml, then kubectl -n ${CONTROL_PLANE.namespace} rollout restart deployment/${CONTROL_PLANE.identity.deployment}`;

/** install's CA has no root key to sign a new intermediate with: a new one is the user's own. */
const rotate = (byInstall: boolean): string =>
  byInstall
    ? `install did not keep the root's key, so bring your own CA: scripts/gen-mesh-ca --out DIR (keep DIR: its root signs the next one), ${RESTART}`
    : `make a new issuing CA (scripts/gen-mesh-ca --out DIR with the same root), ${RESTART}`;

export async function identityChecks(api: KubeApi, now: number): Promise<CheckResult[]> {
  const path = `/api/v1/namespaces/${CONTROL_PLANE.namespace}/secrets/${SECRET}`;
  const r = await api.call('GET', path);
  if (r.status === 404) return [];
  if (r.status !== 200)
    return [
      fail('mesh CA', `reading ${path} answered ${r.status}`, 'run check as a user who may read that Secret'),
    ];
  const secret = r.body as { metadata?: { labels?: Record<string, string> }; data?: Record<string, string> };
  const pemB64 = secret.data?.['tls.crt'];
  const advice = rotate(madeByInstall(secret));
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(Buffer.from(pemB64 ?? '', 'base64'));
  } catch {
    return [
      fail(
        'mesh CA',
        `Secret ${CONTROL_PLANE.namespace}/${SECRET} has no PEM certificate in tls.crt`,
        advice,
      ),
    ];
  }
  const until = Date.parse(cert.validTo);
  const name = `the issuing CA of Secret ${CONTROL_PLANE.namespace}/${SECRET}`;
  if (until <= now)
    return [
      fail('mesh CA', `${name} expired on ${cert.validTo}: it signs certificates no sidecar accepts`, advice),
    ];
  if (until - now < EXPIRY_WARN_MS)
    return [warn('mesh CA', `${name} expires on ${cert.validTo}`, `rotate it soon: ${advice}`)];
  return [pass('mesh CA', `${name} is valid until ${cert.validTo}`)];
}
