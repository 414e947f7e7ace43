import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from '../shared/node-http.ts';
import { listenOn } from '../shared/listen.ts';
import type { AppHealth } from './app-health.ts';

/**
 * The admin listener (default :7402): /healthz, /readyz (with discovery detail), /metrics, and
 * /debug/* sections that other modules register. /debug/* and POST /drain answer only on loopback
 * (Istio's and Linkerd's rule for their admin endpoints): they expose topology and configuration,
 * and every value passes through redact() so secrets never leave.
 */
/**
 * Field names whose values never leave the admin API. Narrower than the logger's list, which also
 * hides `key`: here `key` is a Service's "namespace/name" and must stay readable.
 */
const SECRET =
  /^(token|authorization|bearer|password|secret|ca|cert|cadata|keydata|certdata|privatekey|clientkey)$/i;

export function redactSecrets(value: unknown, depth = 0): unknown {
  if (depth > 8 || value === null || typeof value !== 'object') return value;
  if (value instanceof Map) return redactSecrets(Object.fromEntries(value), depth);
  if (value instanceof Set) return redactSecrets([...value], depth);
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value))
    out[k] = SECRET.test(k) ? '[redacted]' : redactSecrets(v, depth + 1);
  return out;
}

export interface Readiness {
  ready: boolean;
  detail: unknown;
}

export interface AdminOptions {
  host: string;
  port: number;
  readiness: () => Readiness;
  metrics: { render(): Promise<string>; contentType: string };
  debug: Record<string, () => unknown>;
  /** POST /drain (loopback only): a preStop hook's way to start draining before SIGTERM. */
  drain?: () => void;
  /** Kubelet's rewritten app probes (GET /app-health/...): a status, or undefined for unknown paths. */
  appHealth?: AppHealth;
}

export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

export class AdminServer {
  readonly #o: AdminOptions;
  readonly #server: Server;

  constructor(o: AdminOptions) {
    this.#o = o;
    this.#server = createServer({ headersTimeout: 5_000, requestTimeout: 10_000 }, (req, res) => {
      this.#handle(req, res).catch(() => send(res, 500, 'text/plain', 'internal error\n'));
    });
  }

  async start(): Promise<void> {
    await listenOn(this.#server, this.#o.port, this.#o.host);
  }

  port(): number {
    const a = this.#server.address();
    return typeof a === 'object' && a ? a.port : 0;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (path === '/healthz') return send(res, 200, 'text/plain', 'ok\n');
    if (path === '/readyz') {
      const r = this.#o.readiness();
      return send(
        res,
        r.ready ? 200 : 503,
        'application/json',
        JSON.stringify({ ready: r.ready, detail: redactSecrets(r.detail) }) + '\n',
      );
    }
    if (path === '/metrics')
      return send(res, 200, this.#o.metrics.contentType, await this.#o.metrics.render());
    const probed = path.startsWith('/app-health/') ? this.#o.appHealth?.(path) : undefined;
    if (probed) {
      const r = await probed;
      return r.ok
        ? send(res, 200, 'text/plain', 'ok\n')
        : send(res, 503, 'text/plain', `app probe failed: ${r.reason}\n`);
    }
    const local = isLoopback(req.socket.remoteAddress);
    if (path === '/drain' && this.#o.drain) {
      if (!local) return send(res, 403, 'text/plain', 'loopback only\n');
      if (req.method !== 'POST') return send(res, 405, 'text/plain', 'POST only\n');
      this.#o.drain();
      return send(res, 202, 'text/plain', 'draining\n');
    }
    if (path === '/debug' || path.startsWith('/debug/')) {
      if (!local) return send(res, 403, 'text/plain', '/debug is answered on loopback only\n');
      const name = path.slice('/debug/'.length);
      const section = this.#o.debug[name];
      if (!section)
        return send(
          res,
          404,
          'application/json',
          JSON.stringify({ sections: Object.keys(this.#o.debug) }) + '\n',
        );
      return send(res, 200, 'application/json', JSON.stringify(redactSecrets(section()), null, 2) + '\n');
    }
    send(res, 404, 'text/plain', 'not found\n');
  }
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  if (res.headersSent) return void res.end();
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
