// Gateway e2e helpers: a pod (netns-pod.ts) holds the backends and the `outrigger gateway` process;
// the gateway reaches the API server (or the fault proxy in front of it) authenticated with a
// TokenRequest token of the ServiceAccount and RBAC that manifests/gateway ships.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseAllDocuments } from 'yaml';
import { selfSigned, tlsSecretObject } from './tls-certs.ts';
import type { TestCluster } from './cluster.ts';
import type { FaultAction, FaultProxy } from './fault-proxy.ts';
import { createService, createSlice } from './discovery.ts';
import type { KubeAdmin } from './kube.ts';
import {
  netnsPod,
  type LoadSummary,
  type NetnsPod,
  type OutriggerProcess,
  type ProxiedResponse,
} from './netns-pod.ts';
import { writeTokenDir } from './token-dir.ts';
import { repoRoot } from './tools.ts';

export const GATEWAY_PORTS = { http: 18080, https: 18443, admin: 17402 };
export const GATEWAY_NAMESPACE = 'outrigger-gateway';

type Obj = Record<string, unknown> & { kind: string; metadata?: { name?: string; namespace?: string } };

/** The shipped manifests/gateway files, as objects. */
export function gatewayManifest(file: string): Obj[] {
  const text = readFileSync(path.join(repoRoot, 'manifests/gateway', file), 'utf8');
  return parseAllDocuments(text).map((d) => d.toJS() as Obj);
}

export type GatewayProcess = OutriggerProcess;

export interface GatewayPod extends Pick<
  NetnsPod,
  'ns' | 'startBackend' | 'startGrpcBackend' | 'nodeJson' | 'close'
> {
  snapshotDir: string;
  startGateway(extra?: string[]): Promise<GatewayProcess>;
  /** Steady GETs through the gateway's HTTP port, or another proxy's (absolute-form URLs). */
  load(intervalMs: number, durationMs: number, urls: string[], port?: number): Promise<LoadSummary>;
  /** One GET inside the namespace (to the gateway, or another proxy's port): status, body, x-outrigger-error, the backend's x-path. */
  get(url: string, port?: number, headers?: Record<string, string>): Promise<ProxiedResponse>;
  admin(pathname: string): Promise<{ status: number; body: string }>;
  /** The subject CN of the certificate the HTTPS listener presents for servername ('' = no SNI). */
  certificateFor(servername: string): Promise<string>;
}

/**
 * The gateway's pod. apiTarget is where its API traffic goes (the API server or the fault proxy);
 * the gateway's ServiceAccount and RBAC must exist already (applied from manifests/gateway).
 */
export async function gatewayPod(cluster: TestCluster, apiTarget: string): Promise<GatewayPod> {
  const pod = await netnsPod('gateway', apiTarget);
  const snapshotDir = path.join(pod.dir, 'snapshot');
  const tokenDir = path.join(pod.dir, 'serviceaccount');
  try {
    const token = await cluster.admin.mintToken(GATEWAY_NAMESPACE, 'outrigger-gateway');
    writeTokenDir(tokenDir, { token, caPem: cluster.caPem, namespace: GATEWAY_NAMESPACE });
  } catch (e) {
    await pod.close();
    throw e;
  }
  const flags = Object.entries({
    'token-dir': tokenDir,
    'snapshot-dir': snapshotDir,
    'listen-host': '127.0.0.1',
    'http-port': GATEWAY_PORTS.http,
    'https-port': GATEWAY_PORTS.https,
    'admin-port': GATEWAY_PORTS.admin,
    'default-certificate': `${GATEWAY_NAMESPACE}/outrigger-gateway-default-tls`,
  }).flatMap(([flag, value]) => [`--${flag}`, String(value)]);
  return {
    ns: pod.ns,
    snapshotDir,
    startBackend: (address) => pod.startBackend(address),
    startGrpcBackend: (address, port) => pod.startGrpcBackend(address, port),
    nodeJson: <T>(script: string) => pod.nodeJson<T>(script),
    startGateway: (extra = []) => pod.startOutrigger('gateway', [...flags, ...extra], GATEWAY_PORTS.admin),
    load: (intervalMs, durationMs, urls, port = GATEWAY_PORTS.http) =>
      pod.load(port, intervalMs, durationMs, urls),
    get: (target, port = GATEWAY_PORTS.http, headers = {}) => pod.get(port, target, headers),
    admin: (pathname) => pod.admin(GATEWAY_PORTS.admin, pathname),
    certificateFor(servername) {
      const sni = servername ? `servername:${JSON.stringify(servername)},` : '';
      const script = `const s=require('tls').connect({host:'127.0.0.1',port:${GATEWAY_PORTS.https},${sni}rejectUnauthorized:false},()=>{process.stdout.write(JSON.stringify(s.getPeerCertificate().subject?.CN??''));s.destroy()});s.on('error',e=>process.stdout.write(JSON.stringify('error: '+e.message)))`;
      return pod.nodeJson<string>(script);
    },
    close: () => pod.close(),
  };
}

/** Applies the gateway's namespace, ServiceAccount, RBAC and IngressClass, as manifests/gateway ships them. */
export async function applyGatewayRbac(admin: KubeAdmin): Promise<void> {
  for (const file of [
    'namespace.yaml',
    'serviceaccount.yaml',
    'clusterrole.yaml',
    'tls-secrets-role.yaml',
    'ingressclass.yaml',
  ])
    for (const obj of gatewayManifest(file)) await admin.apply(obj);
}

/** The e2e scenario: 40 Ingresses (80 rules) over 4 Services with 2 backends each, and TLS. */
export const SCENARIO = { services: 4, ingresses: 40, routes: 80 };
export const backendsOf = (k: number): string[] => [`10.244.0.${k * 10 + 1}`, `10.244.0.${k * 10 + 2}`];

/** Ingress ing-i: host hi.example.com, `/` -> svc-(i mod 4) by port number, `/api` -> the next by port name. */
export function scenarioIngress(ns: string, i: number): Obj {
  const backend = (svc: number, port: Record<string, unknown>) => ({
    service: { name: `svc-${svc % SCENARIO.services}`, port },
  });
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name: `ing-${i}`, namespace: ns },
    spec: {
      ingressClassName: 'outrigger',
      ...(i === 0 ? { tls: [{ hosts: ['h0.example.com'], secretName: 'h0-tls' }] } : {}),
      rules: [
        {
          host: `h${i}.example.com`,
          http: {
            paths: [
              { path: '/', pathType: 'Prefix', backend: backend(i, { number: 80 }) },
              { path: '/api', pathType: 'Prefix', backend: backend(i + 1, { name: 'http' }) },
            ],
          },
        },
      ],
    },
  };
}

/**
 * Creates the scenario in a fresh namespace: the Services and their EndpointSlices, the Ingresses,
 * the default certificate and h0.example.com's TLS Secret, and the Role that grants the gateway
 * that one Secret by name (as manifests/gateway/example/tls-role.yaml does). Returns the
 * namespace and the 80 URLs (one per rule).
 */
export async function createScenario(admin: KubeAdmin): Promise<{ ns: string; urls: string[] }> {
  const ns = await admin.createNamespace('gw-app');
  const certs = { default: selfSigned('default.gateway'), h0: selfSigned('h0.example.com') };
  await admin.apply(tlsSecretObject(GATEWAY_NAMESPACE, 'outrigger-gateway-default-tls', certs.default));
  await admin.apply(tlsSecretObject(ns, 'h0-tls', certs.h0));
  await admin.apply(tlsSecretObject(ns, 'not-served', certs.default));
  for (const obj of gatewayManifest('example/tls-role.yaml')) {
    const o = structuredClone(obj) as Obj & {
      metadata: { namespace: string };
      rules?: { resourceNames: string[] }[];
    };
    o.metadata.namespace = ns;
    if (o.kind === 'Role' && o.rules?.[0]) o.rules[0].resourceNames = ['h0-tls'];
    await admin.apply(o);
  }
  for (let k = 0; k < SCENARIO.services; k++) {
    await createService(admin, ns, `svc-${k}`);
    await createSlice(admin, ns, `svc-${k}`, `svc-${k}-a`, backendsOf(k));
  }
  const urls: string[] = [];
  for (let i = 0; i < SCENARIO.ingresses; i++) {
    await admin.apply(scenarioIngress(ns, i));
    urls.push(`http://h${i}.example.com/`, `http://h${i}.example.com/api/x`);
  }
  return { ns, urls };
}

/** The gateway's /debug/gateway counts (routes -1 when it does not answer). */
export async function gatewayStatus(
  pod: GatewayPod,
): Promise<{ routes: number; stale: unknown[]; tlsSecrets: number; grpcRoutes?: number }> {
  const r = await pod.admin('/debug/gateway');
  return r.status === 200
    ? (JSON.parse(r.body) as { routes: number; stale: unknown[]; tlsSecrets: number; grpcRoutes?: number })
    : { routes: -1, stale: [], tlsSecrets: -1 };
}

/** The scenario's one change: h1.example.com's `/` moves from svc-1 to svc-3. */
export async function moveH1ToSvc3(admin: KubeAdmin, ns: string): Promise<void> {
  const path = {
    path: '/',
    pathType: 'Prefix',
    backend: { service: { name: 'svc-3', port: { number: 80 } } },
  };
  await admin.patch('Ingress', 'ing-1', ns, {
    spec: { rules: [{ host: 'h1.example.com', http: { paths: [path] } }] },
  });
}

/**
 * The Skipper failure's conditions, ~10.5 s: every watch cut and answered with a 410 event (so
 * everything relists) while the Ingress, Service and EndpointSlice lists fail with 500, then
 * resets, then stalls (3.5 s each). Leaves the proxy without rules.
 */
export async function relistFaults(
  proxy: FaultProxy,
  lists = /\/(ingresses|services|endpointslices)(\?(?!.*watch=)|$)/,
): Promise<void> {
  for (const action of [500, 'reset', 'stall'] as FaultAction[]) {
    proxy.rules.length = 0;
    proxy.rules.push(
      { match: lists, action },
      { match: /watch=(true|1)/, action: 'gone-event', remaining: 20 },
    );
    proxy.dropWatches();
    await delay(3_500);
    proxy.releaseStalls();
  }
  proxy.rules.length = 0;
  proxy.releaseStalls();
}
