import { X509Certificate } from 'node:crypto';
import { errorMessage } from '../shared/errors.ts';
import { RENEW_WITHIN_MS } from './install-tls.ts';
import type { SecretData } from './install-state.ts';
import { issueIntermediate, makeCa } from './pki.ts';

/**
 * The mesh CA of `install --identity`, as `linkerd install` makes its own: a root (the trust
 * anchor every sidecar trusts) and an issuing intermediate (pathlen 0) the issuer signs with. Only
 * the intermediate's key goes into the cluster; the root's key is discarded once it has signed,
 * so nothing in the cluster can mint a CA the mesh trusts. The cost: a new intermediate needs a
 * root key, so rotating is bringing your own CA (scripts/gen-mesh-ca keeps its root key offline).
 *
 * An installed CA is kept byte for byte: a new root would make every running sidecar distrust
 * every new certificate until it reloads its trust bundle.
 */
const DAY_MS = 86_400_000;
/** The intermediate's lifetime, as scripts/gen-mesh-ca's default; the root lives ten times as long. */
export const MESH_CA_DAYS = 365;

export interface InstalledMeshCa {
  data: SecretData;
  /** install made it (it carries install's label); otherwise it is the user's own, never printed. */
  owned: boolean;
}

export interface MeshCaPlan {
  /** The Secret's data (base64): tls.crt and tls.key the intermediate, ca.crt the root. */
  data: SecretData;
  /** The trust bundle (the root), PEM. */
  bundle: string;
  /** Print the Secret and trust-bundle ConfigMap: false for a CA the user brought. */
  print: boolean;
  /** What to tell the user about it. */
  note: string;
}

const b64 = (s: string): string => Buffer.from(s).toString('base64');
const unb64 = (s: string): string => Buffer.from(s, 'base64').toString('utf8');

export const MESH_CA_ROTATE =
  'rotating it is bringing your own CA: scripts/gen-mesh-ca --out DIR, then kubectl apply -f DIR/manifests.yaml (see docs/identity.md)';

export function planMeshCa(installed: InstalledMeshCa | undefined, secret: string, now: number): MeshCaPlan {
  if (!installed) return issueMeshCa(now);
  const bundle = unb64(installed.data['ca.crt'] ?? '');
  const whose = installed.owned
    ? 'the mesh CA'
    : 'your mesh CA (not made by install: not printed, and uninstall leaves it)';
  return {
    data: installed.data,
    bundle,
    print: installed.owned,
    note: `keeping ${whose} of Secret ${secret}${expiry(installed.data, now)}`,
  };
}

/** ", valid until ..." or why it needs a rotation soon. */
function expiry(data: SecretData, now: number): string {
  let validTo: string;
  try {
    validTo = new X509Certificate(unb64(data['tls.crt'])).validTo;
  } catch (e) {
    return `; its tls.crt does not parse (${errorMessage(e)}): ${MESH_CA_ROTATE}`;
  }
  return Date.parse(validTo) - now < RENEW_WITHIN_MS
    ? `; its issuing CA expires on ${validTo}: ${MESH_CA_ROTATE}`
    : ` (issuing CA valid until ${validTo})`;
}

function issueMeshCa(now: number): MeshCaPlan {
  // A minute of slack for clocks that run behind this one.
  const from = new Date(now - 60_000);
  const until = (days: number): Date => new Date(now + days * DAY_MS);
  const root = makeCa('outrigger mesh root', { notBefore: from, notAfter: until(10 * MESH_CA_DAYS) });
  const issuing = issueIntermediate(root, 'outrigger identity issuer', {
    notBefore: from,
    notAfter: until(MESH_CA_DAYS),
  });
  return {
    data: { 'tls.crt': b64(issuing.certPem), 'tls.key': b64(issuing.keyPem), 'ca.crt': b64(root.certPem) },
    bundle: root.certPem,
    print: true,
    note: `a new mesh CA: a root valid until ${root.cert.validTo} and an issuing CA valid until ${issuing.cert.validTo}; the root's key is not kept, so ${MESH_CA_ROTATE}`,
  };
}
