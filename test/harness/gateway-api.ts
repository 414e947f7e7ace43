// Gateway API in the test cluster: the standard channel's CRDs as sigs.k8s.io/gateway-api publishes
// them (fetched by `scripts/test-cluster build`), the gateway's opt-in RBAC and GatewayClass from
// manifests/gateway/gateway-api.yaml, and the objects the tests route by.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseAllDocuments } from 'yaml';
import { gatewayManifest, GATEWAY_NAMESPACE } from './gateway.ts';
import type { KubeAdmin } from './kube.ts';
import { testBinaries } from './tools.ts';

type Obj = Record<string, unknown> & { kind: string; metadata?: { name?: string; namespace?: string } };

export const gatewayApiCrdsDir = (): string => testBinaries()['gateway-api-crds'];

/** Creates every CRD of the standard channel and waits until the API serves them. */
export async function installGatewayApi(admin: KubeAdmin): Promise<void> {
  const dir = gatewayApiCrdsDir();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
    for (const doc of parseAllDocuments(readFileSync(path.join(dir, file), 'utf8'))) {
      const obj = doc.toJS() as Obj | null;
      if (obj?.kind === 'CustomResourceDefinition') await admin.apply(obj);
    }
  }
  for (let i = 0; ; i++) {
    const ok = await admin
      .request('GET', '/apis/gateway.networking.k8s.io/v1/httproutes')
      .then(() => true)
      .catch(() => false);
    if (ok) break;
    if (i > 100) throw new Error('the Gateway API CRDs were not served within 20 s');
    await delay(200);
  }
  for (const obj of gatewayManifest('gateway-api.yaml')) await admin.apply(obj);
}

/** A Gateway of class outrigger in the gateway's namespace: one HTTP listener open to every namespace. */
export const edgeGateway = (): Obj => ({
  apiVersion: 'gateway.networking.k8s.io/v1',
  kind: 'Gateway',
  metadata: { name: 'edge', namespace: GATEWAY_NAMESPACE },
  spec: {
    gatewayClassName: 'outrigger',
    listeners: [{ name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } }],
  },
});

export const httpRoute = (ns: string, name: string, spec: Record<string, unknown>): Obj => ({
  apiVersion: 'gateway.networking.k8s.io/v1',
  kind: 'HTTPRoute',
  metadata: { name, namespace: ns },
  spec: { parentRefs: [{ name: 'edge', namespace: GATEWAY_NAMESPACE }], ...spec },
});
