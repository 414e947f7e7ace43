// Minimal Node reverse proxies that bracket Outrigger's data path in the benchmark:
//   raw        node:http server piping into http.request with a keep-alive Agent (the Node ceiling
//              for this architecture)
//   http-proxy the http-proxy package with the same keep-alive Agent (what Outrigger builds on)
//   undici     undici's Pool.stream as the upstream client (what replacing http.request would buy)
// Usage: node scripts/bench/node-proxies.ts KIND LISTEN_PORT UPSTREAM_PORT
import http from 'node:http';
import httpProxy from 'http-proxy';

const [kind, listen, upstream] = process.argv.slice(2);
const port = Number(listen);
const target = Number(upstream);
const agent = new http.Agent({ keepAlive: true, maxSockets: 128, scheduling: 'lifo' });

async function handler(): Promise<http.RequestListener> {
  if (kind === 'raw') {
    return (req, res) => {
      const up = http.request(
        { host: '127.0.0.1', port: target, method: req.method, path: req.url, headers: req.headers, agent },
        (ur) => {
          res.writeHead(ur.statusCode ?? 502, ur.headers);
          ur.pipe(res);
        },
      );
      up.on('error', () => {
        res.writeHead(502).end();
      });
      req.pipe(up);
    };
  }
  if (kind === 'http-proxy') {
    const proxy = httpProxy.createProxyServer({ target: `http://127.0.0.1:${target}`, agent });
    proxy.on('error', (_e, _req, res) => {
      if ('writeHead' in res) res.writeHead(502).end();
    });
    return (req, res) => proxy.web(req, res);
  }
  if (kind === 'undici') {
    // undici ships with @kubernetes/client-node; the benchmark borrows it, the sidecar does not.
    const { Pool } = await import('undici');
    const pool = new Pool(`http://127.0.0.1:${target}`, { connections: 128, pipelining: 1 });
    return (req, res) => {
      pool
        .stream(
          {
            path: req.url ?? '/',
            method: req.method as 'GET',
            headers: { 'user-agent': req.headers['user-agent'] ?? '' },
          },
          ({ statusCode, headers }) => {
            res.writeHead(statusCode, headers as http.OutgoingHttpHeaders);
            return res;
          },
        )
        .catch(() => {
          if (!res.headersSent) res.writeHead(502);
          res.end();
        });
    };
  }
  throw new Error(`unknown kind ${kind}: raw, http-proxy or undici`);
}

const server = http.createServer({ keepAliveTimeout: 65_000 }, await handler());
server.listen(port, '127.0.0.1', () => process.stdout.write(`listening ${kind} ${port}\n`));
process.on('SIGTERM', () => process.exit(0));
