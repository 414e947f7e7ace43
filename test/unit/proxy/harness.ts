import {
  createServer,
  request,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { readFileSync } from 'node:fs';
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net';
import {
  createDataPath,
  type DataPath,
  type DataPathConfig,
  type DataPathDeps,
} from '../../../src/compose/data-path.ts';
import { FakeResolver } from '../../harness/fake-resolver.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

/** Test backends and a sidecar on 127.0.0.1 with free ports; everything stays on loopback. */
export interface Backend {
  port: number;
  hits: { method: string; url: string; headers: IncomingHttpHeaders }[];
  server: Server;
  close(): Promise<void>;
}

export async function startBackend(
  handle: (req: IncomingMessage, res: ServerResponse) => void = (req, res) => {
    res.setHeader('content-type', 'text/plain');
    res.end(`hello from ${req.socket.localPort}`);
  },
): Promise<Backend> {
  const hits: Backend['hits'] = [];
  const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
    hits.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    handle(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    hits,
    server,
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

export interface Received {
  method: string;
  url: string;
  body: string;
}

/** A backend that reads each request body whole and records it before answering. */
export async function startRecorder(
  answer: (r: Received, res: ServerResponse) => void = (r, res) => res.end(`got ${r.body.length}`),
): Promise<Backend & { got: Received[] }> {
  const got: Received[] = [];
  const b = await startBackend((req, res) => {
    let body = '';
    req.setEncoding('latin1');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const r = { method: req.method ?? '', url: req.url ?? '', body };
      got.push(r);
      answer(r, res);
    });
  });
  return Object.assign(b, { got });
}

/** A port on which nothing listens (connections are refused). */
/**
 * A port nothing listens on. It is drawn below the kernel's ephemeral range: a port from that
 * range, once closed, can be handed to any parallel test's listen(0) before this test connects.
 */
export async function closedPort(host = '127.0.0.1'): Promise<number> {
  const below = ephemeralLow() - 1;
  for (let i = 0; i < 50; i++) {
    const port = 10_000 + Math.floor(Math.random() * (below - 10_000));
    if (await bindable(port, host)) return port;
  }
  throw new Error(`closedPort: no free port found between 10000 and ${below} on ${host}`);
}

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]);
    if (low > 20_000) return low;
  } catch {
    // not Linux: IANA's dynamic range starts at 49152
  }
  return 49_152;
}

function bindable(port: number, host: string): Promise<boolean> {
  const s = createNetServer();
  return new Promise((resolve) => {
    s.once('error', () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

export const baseConfig: DataPathConfig = {
  capture: 'explicit',
  egressPort: 0,
  ingressPort: 0,
  adminPort: 0,
  appPorts: [],
  clusterDomain: 'cluster.local',
  egressPolicy: 'allow-all',
  balancer: 'round-robin',
  connectTimeoutMs: 1_000,
  requestTimeoutMs: 5_000,
  idleTimeoutMs: 10_000,
  retryStatuses: [],
};

export interface Proxy {
  dp: DataPath;
  resolver: FakeResolver;
  log: ReturnType<typeof memoryLogger>;
  egress: number;
  ingress: number;
  admin: number;
  /** The mesh listener's port, with the mesh. */
  mesh?: number;
  close(): Promise<void>;
}

export async function startProxy(
  config: Partial<DataPathConfig> = {},
  deps: Partial<DataPathDeps> = {},
  resolver = new FakeResolver(),
): Promise<Proxy> {
  const log = memoryLogger('warn');
  const dp = createDataPath(
    { ...baseConfig, ...config },
    {
      resolver,
      namespace: 'default',
      log,
      hosts: { egress: '127.0.0.1', ingress: '127.0.0.1', admin: '127.0.0.1', app: '127.0.0.1' },
      discoveryWaitMs: 0,
      ...deps,
    },
  );
  await dp.start();
  const ports = dp.ports();
  return { dp, resolver, log, ...ports, close: () => dp.close() };
}

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request over a fresh connection (agent: false), so tests do not share sockets. */
export function send(
  port: number,
  opts: {
    method?: string;
    path?: string;
    headers?: Record<string, string | string[]>;
    body?: string;
    host?: string;
  } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: opts.host ?? '127.0.0.1',
        port,
        method: opts.method ?? 'GET',
        path: opts.path ?? '/',
        headers: opts.headers ?? {},
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** A raw chunked request (one data chunk) that asks for the connection to be closed after it. */
export function chunkedRequest(method: string, path: string, host: string, body: string): string {
  return (
    `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n` +
    `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
  );
}

/** Writes raw bytes and collects everything until the server closes (bounded by timeoutMs). */
export function raw(port: number, data: string, timeoutMs = 5_000): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    let out = '';
    const timer = setTimeout(() => {
      s.destroy();
      resolve(out + '<<timeout>>');
    }, timeoutMs);
    s.setEncoding('latin1');
    s.on('data', (c: string) => (out += c));
    s.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    s.on('error', () => {});
    s.write(data, 'latin1');
  });
}

/** Reads one metric sample value from /metrics text (0 when absent). */
export async function metric(proxy: Proxy, name: string, labels: Record<string, string>): Promise<number> {
  const text = await proxy.dp.metrics.render();
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}

/** outrigger_requests_total for labels once it reaches want (a hop ends just after its client's stream closes). */
export async function counted(proxy: Proxy, labels: Record<string, string>, want: number): Promise<number> {
  let n = 0;
  for (let i = 0; i < 100; i++) {
    n = await metric(proxy, 'outrigger_requests_total', labels);
    if (n >= want) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return n;
}

/** Writes data on a fresh connection and collects the reply until `done` holds (bounded). */
export function tcpExchange(
  port: number,
  data: string,
  done: (got: string) => boolean,
  timeoutMs = 5_000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    let got = '';
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error(`timeout: ${JSON.stringify(got)}`));
    }, timeoutMs);
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      got += d;
      if (done(got)) {
        clearTimeout(t);
        s.destroy();
        resolve(got);
      }
    });
    s.on('error', reject);
    s.write(data, 'latin1');
  });
}

/**
 * Writes `first` (a CONNECT or upgrade request) on a fresh connection, then `then` once a header
 * block came back; collects the reply until `until` holds or the connection closes (bounded: 5 s).
 */
export function exchange(
  port: number,
  first: string,
  then: string,
  until: (s: string) => boolean = () => false,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port });
    let out = '';
    let sent = false;
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`timeout; got ${JSON.stringify(out)}`));
    }, 5_000);
    const finish = (): void => {
      clearTimeout(timer);
      s.destroy();
      resolve(out);
    };
    s.setEncoding('latin1');
    s.on('data', (c: string) => {
      out += c;
      if (!sent && out.includes('\r\n\r\n')) {
        sent = true;
        s.write(then);
      }
      if (until(out)) finish();
    });
    s.on('error', () => {});
    s.on('close', finish);
    s.write(first);
  });
}

/** Polls cond every 25 ms until it holds; fails the test after about 7.5 s. */
export async function eventually(what: string, cond: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`never: ${what}`);
}
