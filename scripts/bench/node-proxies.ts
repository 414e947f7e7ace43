// Minimal Node reverse proxies that bracket Outrigger's data path in the benchmark. Each is a
// node:http server; they differ only in the upstream client:
//   raw            http.request with a keep-alive Agent (maxSockets 128), piped both ways
//   http-proxy     the http-proxy package's web() with the same keep-alive Agent
//   undici         undici Pool (128 connections) dispatch() with a handler that writes straight
//                  into the ServerResponse: the lowest-level undici API
//   undici-stream  undici Pool stream() with a factory that returns the ServerResponse
// Every kind strips hop-by-hop headers both ways and streams request bodies, so they do the same
// work per request.
// Usage: node scripts/bench/node-proxies.ts KIND LISTEN_PORT UPSTREAM_PORT
import http from 'node:http';
import httpProxy from 'http-proxy';
import type { Dispatcher } from 'undici';

const [kind, listen, upstream] = process.argv.slice(2);
const port = Number(listen);
const target = Number(upstream);
const agent = new http.Agent({ keepAlive: true, maxSockets: 128, scheduling: 'lifo' });

// A bare pipe stands alone (it is run outside the checkout), so it keeps its own hop-by-hop list.
const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'transfer-encoding',
  'upgrade',
  'trailer',
  'expect',
  'host',
]);
function strip(h: http.IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const k in h) {
    const v = h[k];
    if (v !== undefined && !HOP.has(k)) out[k] = v;
  }
  return out;
}
const hasBody = (req: http.IncomingMessage): boolean =>
  req.headers['transfer-encoding'] !== undefined ||
  (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');

function fail(res: http.ServerResponse): void {
  if (!res.headersSent) res.writeHead(502).end();
  else res.destroy();
}

/** A dispatch() handler that writes the upstream response straight into the ServerResponse. */
class ResponseWriter implements Dispatcher.DispatchHandler {
  readonly #res: http.ServerResponse;
  constructor(res: http.ServerResponse) {
    this.#res = res;
  }
  onRequestStart(): void {}
  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: http.IncomingHttpHeaders,
    message?: string,
  ): void {
    this.#res.writeHead(status, message, strip(headers));
    this.#res.on('drain', () => controller.resume());
  }
  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.#res.write(chunk)) controller.pause();
  }
  onResponseEnd(): void {
    this.#res.end();
  }
  onResponseError(_c: Dispatcher.DispatchController, _err: Error): void {
    fail(this.#res);
  }
}

async function handler(): Promise<http.RequestListener> {
  if (kind === 'raw') {
    return (req, res) => {
      const up = http.request(
        {
          host: '127.0.0.1',
          port: target,
          method: req.method,
          path: req.url,
          headers: { ...strip(req.headers), host: req.headers.host ?? '' },
          agent,
        },
        (ur) => {
          res.writeHead(ur.statusCode ?? 502, strip(ur.headers));
          ur.pipe(res);
        },
      );
      up.on('error', () => fail(res));
      req.pipe(up);
    };
  }
  if (kind === 'http-proxy') {
    const proxy = httpProxy.createProxyServer({ target: `http://127.0.0.1:${target}`, agent, toProxy: true });
    proxy.on('error', (_e, _req, res) => {
      if ('writeHead' in res) fail(res);
    });
    return (req, res) => proxy.web(req, res);
  }
  const { Pool } = await import('undici');
  const pool = new Pool(`http://127.0.0.1:${target}`, { connections: 128, pipelining: 1 });
  const options = (req: http.IncomingMessage): Dispatcher.DispatchOptions => ({
    path: req.url ?? '/',
    method: req.method ?? 'GET',
    headers: { ...strip(req.headers), host: req.headers.host ?? '' },
    body: hasBody(req) ? req : null,
  });
  if (kind === 'undici') return (req, res) => void pool.dispatch(options(req), new ResponseWriter(res));
  if (kind === 'undici-stream') {
    return (req, res) => {
      pool
        .stream(options(req), ({ statusCode, headers }) => {
          res.writeHead(statusCode, strip(headers));
          return res;
        })
        .catch(() => fail(res));
    };
  }
  throw new Error(`unknown kind ${kind}: raw, http-proxy, undici or undici-stream`);
}

const server = http.createServer({ keepAliveTimeout: 65_000 }, await handler());
server.listen(port, '127.0.0.1', () => process.stdout.write(`listening ${kind} ${port}\n`));
process.on('SIGTERM', () => process.exit(0));
