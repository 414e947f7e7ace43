// The benchmark's backend and the peers Outrigger is judged against: nginx, HAProxy, Skipper and
// bare Node pipes, each a reverse proxy to the same backend with keep-alive upstream connections.
import type { ChildProcess } from 'node:child_process';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import type { BenchBuild } from './build.ts';
import { benchPort, dir, have, launch } from './procs.ts';
import { ONE_KIB } from './workloads.ts';

export const BACKEND_PORT = benchPort(0);
const NGINX = benchPort(1);
const HAPROXY = benchPort(2);
const SKIPPER = benchPort(12);

export interface BenchTarget {
  name: string;
  port: number;
  authority: string;
  /** Starts the target; returns the processes whose CPU and RSS count as the target's. */
  start(): ChildProcess[] | Promise<ChildProcess[]>;
  /** Resolves when the target can serve (default: its port accepts connections). */
  ready?(): Promise<void>;
  /** The target's admin port, whose /metrics carries outrigger_event_loop_delay_seconds. */
  adminPorts?: number[];
  note?: string;
}

function nginxConf(name: string, body: string): string {
  const file = path.join(dir, `${name}.conf`);
  writeFileSync(
    file,
    `worker_processes 1;
daemon off;
pid ${dir}/${name}.pid;
error_log ${dir}/${name}-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 65s;
  client_body_temp_path ${dir}/${name}-body;
  proxy_temp_path ${dir}/${name}-proxy;
  ${body}
}
`,
  );
  return file;
}

/** One nginx worker: 12 bytes on every path (a POST body is read and discarded), 1 KiB on /1k. */
export function startBackend(): ChildProcess {
  const conf = nginxConf(
    'backend',
    `server { listen 127.0.0.1:${BACKEND_PORT}; default_type text/plain;
    location / { return 200 "hello world\\n"; }
    location = /1k { return 200 "${ONE_KIB.replace('\n', '\\n')}"; } }`,
  );
  return launch('nginx', ['-c', conf, '-e', `${dir}/backend-error.log`], { cpu: 'load' });
}

/** Skipper as scripts/bench/build-skipper leaves it in the test-binary cache, if it is there. */
export function skipperBinary(): string | undefined {
  const cache =
    process.env.OUTRIGGER_TESTBINS ??
    path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'), 'outrigger-testbins');
  const bin = path.join(cache, 'bin');
  if (!existsSync(bin)) return undefined;
  const d = readdirSync(bin)
    .filter((n) => n.startsWith('skipper-v'))
    .sort()
    .at(-1);
  const file = d && path.join(bin, d, 'skipper');
  return file && existsSync(file) ? file : undefined;
}

export function peerTargets(build: BenchBuild): BenchTarget[] {
  const node = process.execPath;
  const nodeProxy = (kind: string, port: number, note: string): BenchTarget => ({
    name: `node ${kind}`,
    port,
    authority: `127.0.0.1:${port}`,
    start: () => [launch(node, [build.nodeProxies, kind, String(port), String(BACKEND_PORT)])],
    note,
  });
  const out: BenchTarget[] = [
    { name: 'direct', port: BACKEND_PORT, authority: `127.0.0.1:${BACKEND_PORT}`, start: () => [] },
  ];
  if (have('nginx'))
    out.push({
      name: 'nginx',
      port: NGINX,
      authority: `127.0.0.1:${NGINX}`,
      start: () => {
        const conf = nginxConf(
          'proxy',
          `upstream backend { server 127.0.0.1:${BACKEND_PORT}; keepalive 128; }
  server { listen 127.0.0.1:${NGINX}; location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; } }`,
        );
        return [launch('nginx', ['-c', conf, '-e', `${dir}/proxy-error.log`])];
      },
    });
  if (have('haproxy'))
    out.push({
      name: 'haproxy',
      port: HAPROXY,
      authority: `127.0.0.1:${HAPROXY}`,
      start: () => {
        const cfg = path.join(dir, 'haproxy.cfg');
        writeFileSync(
          cfg,
          `global
  nbthread 1
  maxconn 4096
defaults
  mode http
  option http-keep-alive
  http-reuse always
  timeout connect 5s
  timeout client 65s
  timeout server 65s
frontend f
  bind 127.0.0.1:${HAPROXY}
  default_backend b
backend b
  server s1 127.0.0.1:${BACKEND_PORT} maxconn 1000
`,
        );
        return [launch('haproxy', ['-f', cfg, '-db'])];
      },
    });
  const skipper = skipperBinary();
  if (skipper)
    out.push({
      name: 'skipper',
      port: SKIPPER,
      authority: `127.0.0.1:${SKIPPER}`,
      start: () => [
        launch(
          skipper,
          [
            '-address',
            `127.0.0.1:${SKIPPER}`,
            '-support-listener',
            `127.0.0.1:${SKIPPER + 1}`,
            '-access-log-disabled',
            '-application-log-level',
            'WARN',
            '-inline-routes',
            `all: * -> "http://127.0.0.1:${BACKEND_PORT}"`,
          ],
          { env: { ...process.env, GOMAXPROCS: '1' } },
        ),
      ],
      note: `${spawnSync(skipper, ['-version'], { encoding: 'utf8' }).stdout.split('\n')[0] ?? ''}, GOMAXPROCS=1, access log off, one inline route to the backend`,
    });
  else process.stderr.write('bench: no Skipper binary (scripts/bench/build-skipper); its row is left out\n');
  out.push(
    nodeProxy('raw', benchPort(3), 'node:http server -> http.request, keep-alive Agent of 128'),
    nodeProxy('http-proxy', benchPort(4), 'node:http server -> http-proxy web(), same Agent'),
    nodeProxy(
      'undici',
      benchPort(5),
      'node:http server -> undici Pool (128) dispatch() into the ServerResponse',
    ),
  );
  return out;
}

/** The four upstream clients side by side (scripts/bench/clients.ts). */
export function clientTargets(build: BenchBuild): BenchTarget[] {
  const kinds = ['http-proxy', 'raw', 'undici', 'undici-stream'];
  return kinds.map((kind, i) => {
    const port = benchPort(21 + i);
    return {
      name: kind,
      port,
      authority: `127.0.0.1:${port}`,
      start: () => [launch(process.execPath, [build.nodeProxies, kind, String(port), String(BACKEND_PORT)])],
    };
  });
}
