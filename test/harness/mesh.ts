import { spawnSync } from 'node:child_process';
import { createSign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { IssuingCa } from '../../src/mesh/ca.ts';
import type { TokenReviewer, TokenReviewResult } from '../../src/mesh/issuer.ts';
import type { Credentials } from '../../src/mesh/identity-store.ts';
import { generateP256, selfSignedCa, signLeaf } from '../../src/mesh/x509.ts';
import { KubeError, type KubeAdmin } from './kube.ts';
import { repoRoot } from './tools.ts';

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

/** scripts/gen-mesh-ca into a fresh directory: a root and an issuing intermediate, as users make them. */
export function generateMeshCa(dir: string): { certFile: string; keyFile: string; bundleFile: string } {
  const r = spawnSync('bash', [path.join(repoRoot, 'scripts/gen-mesh-ca'), '--out', dir], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`gen-mesh-ca failed: ${r.stderr}`);
  return {
    certFile: path.join(dir, 'tls.crt'),
    keyFile: path.join(dir, 'tls.key'),
    bundleFile: path.join(dir, 'ca.crt'),
  };
}

/** Applies manifests/identity/rbac.yaml's ClusterRole and binds it to a test ServiceAccount. */
export async function bindIssuerRole(
  admin: KubeAdmin,
  namespace: string,
  serviceAccount: string,
): Promise<void> {
  const text = readFileSync(path.join(repoRoot, 'manifests/identity/rbac.yaml'), 'utf8');
  const role = parseAllDocuments(text)
    .map((d) => d.toJS() as { kind?: string; metadata?: { name?: string } })
    .find((d) => d.kind === 'ClusterRole');
  if (!role) throw new Error('manifests/identity/rbac.yaml has no ClusterRole');
  await admin.apply(role).catch((e: unknown) => {
    if (!(e instanceof KubeError && e.status === 409)) throw e;
  });
  await admin.apply({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: `outrigger-identity-${namespace}-${serviceAccount}` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata?.name ?? '' },
    subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace }],
  });
}

/** A Pending Pod object (no kubelet needed) that tokens can be bound to. */
export async function createPod(admin: KubeAdmin, namespace: string, name: string, serviceAccount: string) {
  await admin.apply({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: {
      serviceAccountName: serviceAccount,
      containers: [{ name: 'app', image: 'example.invalid/app:1' }],
    },
  });
}

/**
 * The same token with its times moved into the past, re-signed with the cluster's service-account
 * signing key: a genuine token the API server itself would have issued, only expired.
 */
export function expiredCopy(token: string, signingKeyFile: string, now = Date.now()): string {
  const [h = '', p = ''] = token.split('.');
  const claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as Record<string, unknown>;
  const s = Math.floor(now / 1000);
  Object.assign(claims, { iat: s - 7200, nbf: s - 7200, exp: s - 3600 });
  const body = `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  const sig = createSign('RSA-SHA256').update(body).sign(readFileSync(signingKeyFile, 'utf8'));
  return `${body}.${sig.toString('base64url')}`;
}

/** POSTs a CSR to an issuer; the raw status, error code and body. */
export function postCsr(
  url: string,
  opts: { trustBundle: string; servername: string; token?: string; csr: string },
): Promise<{ status: number; code: string | undefined; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify({ csr: opts.csr });
    const req = https.request(
      url,
      {
        method: 'POST',
        ca: opts.trustBundle,
        servername: opts.servername,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
        },
        timeout: 20_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const h = res.headers['x-outrigger-error'];
          resolve({
            status: res.statusCode ?? 0,
            code: typeof h === 'string' ? h : undefined,
            body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
          });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('issuer request timed out')));
    req.on('error', reject);
    req.end(payload);
  });
}

/** An unsigned JWT-shaped token naming a service account, for fakes that never verify it. */
export function fakeSaToken(ns: string, sa: string, n = 0): string {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'none' })}.${part({ sub: `system:serviceaccount:${ns}:${sa}`, n })}.sig`;
}

/** Waits (real time, bounded) for work that runs on libuv's thread pool, such as key generation. */
export async function until(what: string, cond: () => boolean, limitMs = 10_000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > limitMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Credentials for a SPIFFE id, signed by a test CA, as WorkloadIdentity would hold them. */
export async function credentialsFor(
  ca: IssuingCa,
  spiffeId: string,
  now = Date.now(),
): Promise<Credentials> {
  const keys = await generateP256();
  const notBefore = now - 60_000;
  const notAfter = now + 3600_000;
  const certificate = await signLeaf(ca.signer, {
    publicKey: keys.publicKey,
    uri: spiffeId,
    notBefore: new Date(notBefore),
    notAfter: new Date(notAfter),
  });
  return { spiffeId, key: keys.privateKey, certificate, chain: ca.chain, notBefore, notAfter };
}

/** Fixed sources for MeshTls: one certificate, one bundle, never rotating. */
export function fixedSources(creds: Credentials | undefined, bundle: string) {
  return {
    identity: { current: () => creds, onChange: () => {} },
    bundle: { pem: () => bundle, onChange: () => {} },
  };
}

/** The environment that points `outrigger proxy --mtls` at an issuer and a pod's files. */
export function identityEnv(issuerUrl: string, dir: string): Record<string, string> {
  return {
    OUTRIGGER_IDENTITY_ISSUER: issuerUrl,
    OUTRIGGER_IDENTITY_TOKEN_FILE: path.join(dir, 'token'),
    OUTRIGGER_IDENTITY_DIR: path.join(dir, 'emptydir'),
    OUTRIGGER_TRUST_BUNDLE_FILE: path.join(dir, 'ca.crt'),
  };
}

/** `outrigger proxy` in explicit capture over a file source: a sidecar without discovery's API. */
export const fileProxyArgs = (clusterYaml: string): string[] => [
  'proxy',
  '--source',
  `file:${clusterYaml}`,
  '--capture',
  'explicit',
];
