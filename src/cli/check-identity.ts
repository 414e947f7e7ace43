import { X509Certificate } from 'node:crypto';
import { EXPIRY_WARN_MS, fail, pass, warn, type CheckResult } from './check-result.ts';
import { CONTROL_PLANE } from './control-plane.ts';
import type { KubeApi } from './kube-api.ts';

/**
 * The mesh certificate issuer's signing CA (Secret outrigger-identity-ca, from scripts/gen-mesh-ca),
 * when mutual TLS is installed: an expired CA signs certificates no sidecar accepts, so every
 * strict pod loses its callers as their certificates renew. Not installed is no failure.
 */
const SECRET = 'outrigger-identity-ca';
const ROTATE = `make a new issuing CA (scripts/gen-mesh-ca --out DIR with the same root), kubectl apply -f DIR/manifests.yaml, then kubectl -n ${CONTROL_PLANE.namespace} rollout restart deployment/outrigger-identity`;

export async function identityChecks(api: KubeApi, now: number): Promise<CheckResult[]> {
  const path = `/api/v1/namespaces/${CONTROL_PLANE.namespace}/secrets/${SECRET}`;
  const r = await api.call('GET', path);
  if (r.status === 404) return [];
  if (r.status !== 200)
    return [
      fail('mesh CA', `reading ${path} answered ${r.status}`, 'run check as a user who may read that Secret'),
    ];
  const pemB64 = (r.body as { data?: Record<string, string> }).data?.['tls.crt'];
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(Buffer.from(pemB64 ?? '', 'base64'));
  } catch {
    return [
      fail(
        'mesh CA',
        `Secret ${CONTROL_PLANE.namespace}/${SECRET} has no PEM certificate in tls.crt`,
        ROTATE,
      ),
    ];
  }
  const until = Date.parse(cert.validTo);
  const name = `the issuing CA of Secret ${CONTROL_PLANE.namespace}/${SECRET}`;
  if (until <= now)
    return [
      fail('mesh CA', `${name} expired on ${cert.validTo}: it signs certificates no sidecar accepts`, ROTATE),
    ];
  if (until - now < EXPIRY_WARN_MS)
    return [warn('mesh CA', `${name} expires on ${cert.validTo}`, `rotate it soon: ${ROTATE}`)];
  return [pass('mesh CA', `${name} is valid until ${cert.validTo}`)];
}
