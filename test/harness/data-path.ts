// Data-path e2e helpers: one network namespace holds the "pods" of a test (netns-pod.ts), the
// sidecar in explicit mode authenticating to the real API server with a TokenRequest token, backends
// on pod IPs, and an app-like load generator.
import type { ChildProcess } from 'node:child_process';
import { after, type TestContext } from 'node:test';
import path from 'node:path';
import { startCluster, type TestCluster } from './cluster.ts';
import { repoRoot } from './tools.ts';
import { sidecarIdentity } from './discovery.ts';
import { requireNetns, type Netns } from './netns.ts';
import { netnsPod, type LoadSummary, type OutriggerProcess, type ProxiedResponse } from './netns-pod.ts';

export type { LoadSummary };

export interface GrpcCalls {
  failed: number;
  failures: unknown[];
  /** Calls by the backend that served them, "address:port". */
  byServer: Record<string, number>;
}

const grpcLoadScript = path.join(repoRoot, 'test/harness/grpc-load.ts');
export type Sidecar = OutriggerProcess;

/** The sidecar's ports in the pod: explicit egress and admin. */
const EGRESS_PORT = 7400;
const ADMIN_PORT = 7402;

export interface PodEnv {
  ns: Netns;
  namespace: string;
  snapshot: string;
  startBackend(address: string): Promise<ChildProcess>;
  startGrpcBackend(address: string, port: number): Promise<ChildProcess>;
  stopBackend(child: ChildProcess): Promise<void>;
  startSidecar(extra?: string[]): Promise<Sidecar>;
  /** Runs the load generator to completion; resolves with its summary. */
  load(intervalMs: number, durationMs: number, urls: string[]): Promise<LoadSummary>;
  /** One GET through the sidecar's egress (an absolute-form URL, as an app behind HTTP_PROXY sends it). */
  get(url: string, headers?: Record<string, string>): Promise<ProxiedResponse>;
  /**
   * n unary TestService calls of a grpc-js client on one channel to the egress (prior-knowledge
   * h2c, :authority target "host:port"), each with metadata; how many failed, and by which backend served.
   */
  grpcCalls(target: string, n: number, metadata?: Record<string, string>): Promise<GrpcCalls>;
  /** One h2c POST of a gRPC call to `path` through the egress: its grpc-status and x-outrigger-error. */
  grpcCall(target: string, path: string): Promise<{ grpcStatus: string; error: string }>;
  admin(pathname: string): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

export async function podEnv(cluster: TestCluster, namespace: string): Promise<PodEnv> {
  const identity = await sidecarIdentity(cluster, namespace);
  const pod = await netnsPod('datapath', cluster.server);
  const snapshot = path.join(pod.dir, 'snapshot.pb');
  return {
    ns: pod.ns,
    namespace,
    snapshot,
    startBackend: (address) => pod.startBackend(address),
    startGrpcBackend: (address, port) => pod.startGrpcBackend(address, port),
    stopBackend: (child) => pod.stopBackend(child),
    startSidecar: (extra = []) =>
      pod.startOutrigger(
        'proxy',
        ['--capture', 'explicit', '--token-dir', identity.dir, '--snapshot', snapshot, ...extra],
        ADMIN_PORT,
      ),
    load: (intervalMs, durationMs, urls) => pod.load(EGRESS_PORT, intervalMs, durationMs, urls),
    get: (url, headers) => pod.get(EGRESS_PORT, url, headers),
    async grpcCalls(target, n, metadata = {}) {
      const argv = [process.execPath, grpcLoadScript, 'direct', String(EGRESS_PORT), target, String(n)];
      const r = await pod.ns.exec([...argv, '0', '0', JSON.stringify(metadata)], { timeoutMs: 60_000 });
      return JSON.parse(r.stdout) as GrpcCalls;
    },
    grpcCall: (target, rpcPath) =>
      pod.nodeJson(
        `const s=require('http2').connect('http://127.0.0.1:${EGRESS_PORT}');s.on('error',()=>{});` +
          `const q=s.request({':method':'POST',':path':${JSON.stringify(rpcPath)},':authority':${JSON.stringify(target)},'content-type':'application/grpc',te:'trailers'});` +
          `let h={};q.on('response',r=>{h=r});q.on('trailers',t=>{h={...h,...t}});q.resume();` +
          `q.on('close',()=>{process.stdout.write(JSON.stringify({grpcStatus:String(h['grpc-status']??''),error:String(h['x-outrigger-error']??'')}));s.close()});q.end()`,
      ),
    admin: (pathname) => pod.admin(ADMIN_PORT, pathname),
    async close() {
      await pod.close();
      identity.cleanup();
    },
  };
}

/**
 * One cluster for a describe() suite, started by the first test that can run (skips otherwise,
 * fails under CI) and stopped after the suite. Call inside describe().
 */
export function suiteCluster(): (t: TestContext) => Promise<TestCluster | undefined> {
  let cluster: TestCluster | undefined;
  let starting: Promise<TestCluster | undefined> | undefined;
  after(async () => {
    if (cluster) await cluster.stop();
  });
  return async (t) => {
    if (!requireNetns(t)) return undefined;
    starting ??= startCluster(t);
    cluster = await starting;
    return cluster;
  };
}
