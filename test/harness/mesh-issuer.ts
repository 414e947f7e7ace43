// The issuer as tests run it: a real cluster, a namespace, `outrigger identity`'s composition
// running as its own ServiceAccount (with the shipped RBAC, or none), a CA from gen-mesh-ca.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { startIdentity, type IdentityOptions, type RunningIssuer } from '../../src/compose/identity.ts';
import type { KubeConnection } from '../../src/kube/connection.ts';
import { createLogger } from '../../src/shared/log.ts';
import { startCluster } from './cluster.ts';
import { bindIssuerRole, generateMeshCa, postCsr } from './mesh.ts';

const log = createLogger({ write: () => {} });

/** A cluster, a namespace and an issuer running as its own ServiceAccount (with the shipped RBAC, or none). */
export async function issuerEnv(
  t: TestContext,
  opts: { rbac: boolean; ttlMs?: number; servingName?: string; issuer?: Partial<IdentityOptions> },
) {
  const servingName = opts.servingName ?? 'outrigger-identity.test';
  const cluster = await startCluster(t);
  if (!cluster) return undefined;
  t.after(() => cluster.stop());
  const { admin } = cluster;
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-mesh-ca-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const ns = await admin.createNamespace('mesh');
  await admin.createServiceAccount(ns, 'issuer');
  if (opts.rbac) await bindIssuerRole(admin, ns, 'issuer');
  const issuerToken = await admin.mintToken(ns, 'issuer');
  const ca = generateMeshCa(join(dir, 'ca'));
  const connection: KubeConnection = {
    server: new URL(cluster.server),
    ca: cluster.caPem,
    authorization: () => `Bearer ${issuerToken}`,
    unauthorized: () => Promise.resolve(false),
  };
  const running: RunningIssuer = await startIdentity(
    {
      host: '127.0.0.1',
      port: 0,
      caCert: ca.certFile,
      caKey: ca.keyFile,
      trustBundle: ca.bundleFile,
      trustDomain: 'cluster.local',
      audience: 'outrigger-identity',
      ttlMs: opts.ttlMs ?? 24 * 3600_000,
      servingNames: [servingName],
      requireBoundPod: true,
      tokenDir: '/nonexistent',
      admin: { host: '127.0.0.1', port: 0 },
      ...opts.issuer,
    },
    { log, connection },
  );
  t.after(() => running.close());
  const trustBundle = readFileSync(ca.bundleFile, 'utf8');
  const post = (token: string | undefined, csr: string) =>
    postCsr(`https://127.0.0.1:${running.server.port}/v1/certificates`, {
      trustBundle,
      servername: servingName,
      ...(token ? { token } : {}),
      csr,
    });
  const url = new URL(`https://127.0.0.1:${running.server.port}`);
  /** One sample of the issuer's /metrics (0 when absent), the labels given as `k="v"` pairs. */
  const metric = async (name: string, labels = ''): Promise<number> => {
    const text = await (await fetch(`http://127.0.0.1:${running.adminPort}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(labels ? `${name}{${labels}}` : `${name} `));
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
  };
  return { cluster, admin, ns, post, trustBundle, ca, running, url, metric, issuerToken };
}
