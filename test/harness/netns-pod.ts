// What the e2e "pods" share (the sidecar's data-path pod, the gateway's): a network namespace whose
// pod range 10.244.0.0/24 is local to its lo, the API server (or a proxy in front of it) reached
// through a Unix-socket bridge, the processes started in it and a temp directory, all gone at
// close(). Nothing gets an address in the host namespace.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bridgeIntoNetns, createNetns, waitForPort, type Bridge, type Netns } from './netns.ts';
import { repoRoot } from './tools.ts';

const node = process.execPath;
const main = path.join(repoRoot, 'src/main.ts');
const backendScript = path.join(repoRoot, 'test/harness/data-path-backend.ts');
const grpcBackendScript = path.join(repoRoot, 'test/harness/grpc-backend.ts');
const loadScript = path.join(repoRoot, 'test/harness/data-path-load.ts');
const API_PORT_IN_POD = 16443;

export interface LoadSummary {
  total: number;
  done: number;
  failed: number;
  failures: { url: string; at: number; status: number; error: string; body: string }[];
  servedBy: Record<string, Record<string, number>>;
}

/** An `outrigger` command running in the pod. */
export interface OutriggerProcess {
  process: ChildProcess;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface NetnsPod {
  ns: Netns;
  /** The pod's temp directory, removed at close(). */
  dir: string;
  /** A data-path backend on address:8080. */
  startBackend(address: string): Promise<ChildProcess>;
  /** A gRPC backend (test/harness/grpc.ts's TestService, h2c) on address:port. */
  startGrpcBackend(address: string, port: number): Promise<ChildProcess>;
  stopBackend(child: ChildProcess): Promise<void>;
  /** `outrigger <command> <args>` against the bridged API server, without traces; resolves once adminPort listens. */
  startOutrigger(command: string, args: string[], adminPort: number): Promise<OutriggerProcess>;
  /** Runs the load generator through a proxy port to completion; resolves with its summary. */
  load(port: number, intervalMs: number, durationMs: number, urls: string[]): Promise<LoadSummary>;
  /** Runs `node -e script` in the namespace and parses what it prints as JSON. */
  nodeJson<T>(script: string): Promise<T>;
  /** One GET to a proxy port in the namespace: status, body, x-outrigger-error, the backend's x-path, Location. */
  get(port: number, target: string, headers?: Record<string, string>): Promise<ProxiedResponse>;
  admin(port: number, pathname: string): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

export interface ProxiedResponse {
  status: number;
  body: string;
  error: string;
  path: string;
  location: string;
}

export function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((r) => child.once('exit', () => r()));
}

function waitForLine(child: ChildProcess, pattern: RegExp, limitMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(
      () => reject(new Error(`no ${String(pattern)} within ${limitMs} ms: ${seen}`)),
      limitMs,
    );
    child.stdout?.on('data', (d: Buffer) => {
      seen += d.toString();
      if (pattern.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before ${String(pattern)}: ${seen}`));
    });
  });
}

/** A pod named name (its namespace and temp directory) whose API traffic goes to apiTarget. */
export async function netnsPod(name: string, apiTarget: string): Promise<NetnsPod> {
  const ns = await createNetns(name, { localRanges: ['10.244.0.0/24'] });
  const url = new URL(apiTarget);
  let bridge: Bridge;
  try {
    bridge = await bridgeIntoNetns(ns, { host: url.hostname, port: Number(url.port) }, API_PORT_IN_POD);
  } catch (e) {
    await ns.remove();
    throw e;
  }
  const dir = mkdtempSync(path.join(tmpdir(), `outrigger-${name}-`));
  const children = new Set<ChildProcess>();
  const track = (c: ChildProcess): ChildProcess => {
    children.add(c);
    c.once('exit', () => children.delete(c));
    return c;
  };
  const nodeJson = async <T>(script: string): Promise<T> => {
    const r = await ns.exec([node, '-e', script], { timeoutMs: 15_000 });
    return JSON.parse(r.stdout) as T;
  };
  return {
    ns,
    dir,
    async startBackend(address) {
      const child = track(ns.spawn([node, backendScript, `${address}:8080`]));
      await waitForLine(child, /listening/, 15_000);
      return child;
    },
    async startGrpcBackend(address, port) {
      const child = track(ns.spawn([node, grpcBackendScript, `${address}:${port}`]));
      await waitForLine(child, /listening/, 15_000);
      return child;
    },
    async stopBackend(child) {
      child.kill('SIGTERM');
      await exited(child);
    },
    async startOutrigger(command, args, adminPort) {
      let out = '';
      const argv = [node, main, command, '--trace-sampling', '0', '--drain-duration', '1s', ...args];
      const env = {
        ...process.env,
        KUBERNETES_SERVICE_HOST: '127.0.0.1',
        KUBERNETES_SERVICE_PORT: String(API_PORT_IN_POD),
        OUTRIGGER_LOG_LEVEL: 'info',
      };
      const child = track(ns.spawn(argv, { env }));
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
      await waitForPort(ns, '127.0.0.1', adminPort, 30_000);
      return {
        process: child,
        output: () => out,
        stop: async (signal = 'SIGTERM') => {
          child.kill(signal);
          await exited(child);
        },
      };
    },
    async load(port, intervalMs, durationMs, urls) {
      const r = await ns.exec(
        [node, loadScript, String(port), String(intervalMs), String(durationMs), ...urls],
        { timeoutMs: durationMs + 60_000 },
      );
      return JSON.parse(r.stdout) as LoadSummary;
    },
    nodeJson,
    get(port, target, headers = {}) {
      const script = `const r=require('http').request({host:'127.0.0.1',port:${port},path:${JSON.stringify(target)},headers:${JSON.stringify(headers)}},res=>{let b='';res.on('data',d=>b+=d);res.on('end',()=>process.stdout.write(JSON.stringify({status:res.statusCode,body:b,error:res.headers['x-outrigger-error']??'',path:res.headers['x-path']??'',location:res.headers.location??''})))});r.on('error',e=>process.stdout.write(JSON.stringify({status:0,body:'',error:e.message,path:'',location:''})));r.end()`;
      return nodeJson(script);
    },
    admin(port, pathname) {
      const script = `fetch('http://127.0.0.1:${port}${pathname}').then(async r => process.stdout.write(JSON.stringify({status:r.status, body: await r.text()})), () => process.stdout.write(JSON.stringify({status:0, body:''})))`;
      return nodeJson(script);
    },
    async close() {
      for (const c of children) c.kill('SIGKILL');
      await Promise.all([...children].map(exited));
      await bridge.close();
      await ns.remove();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
