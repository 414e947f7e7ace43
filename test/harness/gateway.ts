// Gateway e2e helpers: a network namespace whose pod range (10.244.0.0/24) is local holds the
// backends and the `outrigger gateway` process; the gateway reaches the API server (or the fault
// proxy in front of it) through a Unix-socket bridge, authenticated with a TokenRequest token of
// the ServiceAccount and RBAC that manifests/gateway ships. Nothing gets an address in the host
// namespace.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseAllDocuments } from 'yaml';
import { selfSigned, tlsSecretObject } from './tls-certs.ts';
import type { TestCluster } from './cluster.ts';
import type { LoadSummary } from './data-path.ts';
import type { FaultAction, FaultProxy } from './fault-proxy.ts';
import { createService, createSlice } from './discovery.ts';
import type { KubeAdmin } from './kube.ts';
import { bridgeIntoNetns, createNetns, waitForPort, type Bridge, type Netns } from './netns.ts';
import { writeTokenDir } from './token-dir.ts';
import { repoRoot } from './tools.ts';

const node = process.execPath;
const main = path.join(repoRoot, 'src/main.ts');
const backendScript = path.join(repoRoot, 'test/harness/data-path-backend.ts');
const loadScript = path.join(repoRoot, 'test/harness/data-path-load.ts');
const API_PORT_IN_POD = 16443;
export const GATEWAY_PORTS = { http: 18080, https: 18443, admin: 17402 };
export const GATEWAY_NAMESPACE = 'outrigger-gateway';

type Obj = Record<string, unknown> & { kind: string; metadata?: { name?: string; namespace?: string } };

/** The shipped manifests/gateway files, as objects. */
export function gatewayManifest(file: string): Obj[] {
  const text = readFileSync(path.join(repoRoot, 'manifests/gateway', file), 'utf8');
  return parseAllDocuments(text).map((d) => d.toJS() as Obj);
}

export interface GatewayProcess {
  process: ChildProcess;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface GatewayPod {
  ns: Netns;
  snapshotDir: string;
  startBackend(address: string): Promise<ChildProcess>;
  startGateway(extra?: string[]): Promise<GatewayProcess>;
  /** Steady GETs through the gateway's HTTP port, or another proxy's (absolute-form URLs). */
  load(intervalMs: number, durationMs: number, urls: string[], port?: number): Promise<LoadSummary>;
  /** One GET inside the namespace (to the gateway, or another proxy's port): status, body, x-outrigger-error. */
  get(url: string, port?: number): Promise<{ status: number; body: string; error: string }>;
  admin(pathname: string): Promise<{ status: number; body: string }>;
  /** The subject CN of the certificate the HTTPS listener presents for servername ('' = no SNI). */
  certificateFor(servername: string): Promise<string>;
  close(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((r) => child.once('exit', () => r()));
}

async function nodeJson<T>(ns: Netns, script: string): Promise<T> {
  const r = await ns.exec([node, '-e', script], { timeoutMs: 15_000 });
  return JSON.parse(r.stdout) as T;
}

/**
 * The gateway's pod. apiTarget is where its API traffic goes (the API server or the fault proxy);
 * the gateway's ServiceAccount and RBAC must exist already (applied from manifests/gateway).
 */
export async function gatewayPod(cluster: TestCluster, apiTarget: string): Promise<GatewayPod> {
  const ns = await createNetns('gateway', { localRanges: ['10.244.0.0/24'] });
  const url = new URL(apiTarget);
  let bridge: Bridge | undefined;
  const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-gateway-'));
  const snapshotDir = path.join(dir, 'snapshot');
  const tokenDir = path.join(dir, 'serviceaccount');
  const children = new Set<ChildProcess>();
  try {
    bridge = await bridgeIntoNetns(ns, { host: url.hostname, port: Number(url.port) }, API_PORT_IN_POD);
    const token = await cluster.admin.mintToken(GATEWAY_NAMESPACE, 'outrigger-gateway');
    writeTokenDir(tokenDir, { token, caPem: cluster.caPem, namespace: GATEWAY_NAMESPACE });
  } catch (e) {
    await bridge?.close();
    await ns.remove();
    throw e;
  }
  const track = (c: ChildProcess): ChildProcess => {
    children.add(c);
    c.once('exit', () => children.delete(c));
    return c;
  };
  return {
    ns,
    snapshotDir,
    async startBackend(address) {
      const child = track(ns.spawn([node, backendScript, `${address}:8080`]));
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`backend ${address} did not start`)), 15_000);
        child.stdout?.on('data', (d: Buffer) => {
          if (d.toString().includes('listening')) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      return child;
    },
    async startGateway(extra = []) {
      let out = '';
      const child = track(
        ns.spawn(
          [
            node,
            main,
            'gateway',
            '--token-dir',
            tokenDir,
            '--snapshot-dir',
            snapshotDir,
            '--listen-host',
            '127.0.0.1',
            '--http-port',
            String(GATEWAY_PORTS.http),
            '--https-port',
            String(GATEWAY_PORTS.https),
            '--admin-port',
            String(GATEWAY_PORTS.admin),
            '--default-certificate',
            `${GATEWAY_NAMESPACE}/outrigger-gateway-default-tls`,
            '--trace-sampling',
            '0',
            '--drain-seconds',
            '1',
            ...extra,
          ],
          {
            env: {
              ...process.env,
              KUBERNETES_SERVICE_HOST: '127.0.0.1',
              KUBERNETES_SERVICE_PORT: String(API_PORT_IN_POD),
              OUTRIGGER_LOG_LEVEL: 'info',
            },
          },
        ),
      );
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
      await waitForPort(ns, '127.0.0.1', GATEWAY_PORTS.admin, 30_000);
      return {
        process: child,
        output: () => out,
        stop: async (signal = 'SIGTERM') => {
          child.kill(signal);
          await exited(child);
        },
      };
    },
    async load(intervalMs, durationMs, urls, port = GATEWAY_PORTS.http) {
      const r = await ns.exec(
        [node, loadScript, String(port), String(intervalMs), String(durationMs), ...urls],
        { timeoutMs: durationMs + 60_000 },
      );
      return JSON.parse(r.stdout) as LoadSummary;
    },
    get(target, port = GATEWAY_PORTS.http) {
      const script = `const r=require('http').request({host:'127.0.0.1',port:${port},path:${JSON.stringify(target)}},res=>{let b='';res.on('data',d=>b+=d);res.on('end',()=>process.stdout.write(JSON.stringify({status:res.statusCode,body:b,error:res.headers['x-outrigger-error']??''})))});r.on('error',e=>process.stdout.write(JSON.stringify({status:0,body:'',error:e.message})));r.end()`;
      return nodeJson(ns, script);
    },
    admin(pathname) {
      const script = `fetch('http://127.0.0.1:${GATEWAY_PORTS.admin}${pathname}').then(async r => process.stdout.write(JSON.stringify({status:r.status, body: await r.text()})), () => process.stdout.write(JSON.stringify({status:0, body:''})))`;
      return nodeJson(ns, script);
    },
    async certificateFor(servername) {
      const sni = servername ? `servername:${JSON.stringify(servername)},` : '';
      const script = `const s=require('tls').connect({host:'127.0.0.1',port:${GATEWAY_PORTS.https},${sni}rejectUnauthorized:false},()=>{process.stdout.write(JSON.stringify(s.getPeerCertificate().subject?.CN??''));s.destroy()});s.on('error',e=>process.stdout.write(JSON.stringify('error: '+e.message)))`;
      return nodeJson<string>(ns, script);
    },
    async close() {
      for (const c of children) c.kill('SIGKILL');
      await Promise.all([...children].map(exited));
      await bridge?.close();
      await ns.remove();
      rmSync(dir, { recursive: true, force: true });
    },
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
): Promise<{ routes: number; stale: unknown[]; tlsSecrets: number }> {
  const r = await pod.admin('/debug/gateway');
  return r.status === 200
    ? (JSON.parse(r.body) as { routes: number; stale: unknown[]; tlsSecrets: number })
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
export async function relistFaults(proxy: FaultProxy): Promise<void> {
  const lists = /\/(ingresses|services|endpointslices)(\?(?!.*watch=)|$)/;
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
