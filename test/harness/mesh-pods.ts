// Mesh e2e helpers: "pods" as network namespaces joined by a veth, each running a real
// `outrigger proxy --mtls ...` with a TokenRequest token of audience outrigger-identity bound to a
// real Pod object, the issuer (in the test process) and nothing else bridged in at 127.0.0.1.
import type { ChildProcess } from 'node:child_process';
import { chownSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileProxyArgs, identityEnv } from './mesh.ts';
import { bridgeIntoNetns, waitForPort, type Bridge, type Netns } from './netns.ts';
import { repoRoot } from './tools.ts';

const node = process.execPath;
const main = path.join(repoRoot, 'src/main.ts');
export const ISSUER_PORT_IN_POD = 18443;

export interface MeshPod {
  ns: Netns;
  ip: string;
  dir: string;
  sidecar: ChildProcess | undefined;
  output(): string;
  /** uid: run as this user (transparent capture exempts the proxy's UID); it then owns the pod's files. */
  startSidecar(args: string[], opts?: { uid?: number }): Promise<void>;
  killSidecar(): Promise<void>;
  /** GET through a URL from inside the pod (node's http), status, headers and body. */
  get(
    url: string,
    opts?: { host?: string; proxyPort?: number },
  ): Promise<{ status: number; headers: Record<string, string>; body: string }>;
  admin(pathname: string): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

const exited = (c: ChildProcess): Promise<void> =>
  c.exitCode !== null || c.signalCode !== null
    ? Promise.resolve()
    : new Promise((r) => c.once('exit', () => r()));

/** An app that answers with the caller identity its sidecar vouched for. */
export function startEchoApp(ns: Netns, address: string, port: number): ChildProcess {
  const script = `require('http').createServer((q,s)=>{s.setHeader('content-type','application/json');s.end(JSON.stringify({xfcc:q.headers['x-forwarded-client-cert']??null}))}).listen(${port},${JSON.stringify(address)},()=>console.log('listening'))`;
  return ns.spawn([node, '-e', script]);
}

export async function meshPod(
  ns: Netns,
  ip: string,
  dir: string,
  files: { token: string; trustBundle: string; clusterYaml: string },
  issuer: { host: string; port: number },
): Promise<MeshPod> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'token'), files.token);
  writeFileSync(path.join(dir, 'ca.crt'), files.trustBundle);
  writeFileSync(path.join(dir, 'cluster.yaml'), files.clusterYaml);
  const bridge: Bridge = await bridgeIntoNetns(ns, issuer, ISSUER_PORT_IN_POD);
  let out = '';
  const pod: MeshPod = {
    ns,
    ip,
    dir,
    sidecar: undefined,
    output: () => out,
    async startSidecar(args, opts = {}) {
      if (opts.uid !== undefined)
        for (const f of ['', ...readdirSync(dir)]) chownSync(path.join(dir, f), opts.uid, opts.uid);
      const child = ns.spawn([node, main, ...fileProxyArgs(path.join(dir, 'cluster.yaml')), ...args], {
        ...(opts.uid === undefined ? {} : { uid: opts.uid, gid: opts.uid }),
        env: {
          ...process.env,
          OUTRIGGER_TRACE_SAMPLING: '0',
          OUTRIGGER_DRAIN_DURATION: '0s',
          OUTRIGGER_POD_INFO_DIR: dir,
          ...identityEnv(`https://127.0.0.1:${ISSUER_PORT_IN_POD}/`, dir),
        },
      });
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
      pod.sidecar = child;
      await waitForPort(ns, '127.0.0.1', 7402, 30_000).catch((e: unknown) => {
        throw new Error(`${(e as Error).message}; sidecar output:\n${out}`);
      });
    },
    async killSidecar() {
      const c = pod.sidecar;
      if (!c) return;
      c.kill('SIGKILL');
      await exited(c);
      pod.sidecar = undefined;
    },
    async get(url, opts = {}) {
      const u = new URL(url);
      const target = opts.proxyPort
        ? { host: '127.0.0.1', port: opts.proxyPort, path: url }
        : { host: u.hostname, port: Number(u.port || 80), path: u.pathname };
      const script = `require('http').request({host:${JSON.stringify(target.host)},port:${target.port},path:${JSON.stringify(target.path)},headers:{host:${JSON.stringify(opts.host ?? u.host)}},timeout:10000},r=>{let b='';r.setEncoding('utf8');r.on('data',d=>b+=d);r.on('end',()=>process.stdout.write(JSON.stringify({status:r.statusCode,headers:r.headers,body:b})))}).on('error',e=>process.stdout.write(JSON.stringify({status:0,headers:{},body:String(e.code||e.message)}))).end()`;
      const r = await ns.exec([node, '-e', script], { timeoutMs: 20_000 });
      return JSON.parse(r.stdout) as { status: number; headers: Record<string, string>; body: string };
    },
    async admin(pathname) {
      const r = await pod.get(`http://127.0.0.1:7402${pathname}`);
      return { status: r.status, body: r.body };
    },
    async close() {
      await pod.killSidecar();
      await bridge.close();
    },
  };
  return pod;
}

/**
 * Whether captured bytes are nothing but TLS records (RFC 8446 section 5.1: a content type, the
 * legacy version 3.x, a length); the last record may still be in flight.
 */
export function onlyTlsRecords(bytes: Buffer): boolean {
  let at = 0;
  while (at + 5 <= bytes.length) {
    const type = bytes[at] ?? 0;
    if (type < 0x14 || type > 0x17 || bytes[at + 1] !== 0x03) return false;
    at += 5 + bytes.readUInt16BE(at + 3);
  }
  return bytes.length > 0 && (at >= bytes.length || bytes.length - at < 5);
}
