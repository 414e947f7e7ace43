import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { TestCluster } from './cluster.ts';

/**
 * What a rule does to a matching request:
 * - 500 / 429 / 410: answer with that status and a Kubernetes Status body (429 adds Retry-After: 1);
 * - 'gone-event': 200 and a single watch ERROR event with code 410, as the API server sends when
 *   a watch's resourceVersion is too old; then the stream ends;
 * - 'reset': the TCP connection is reset (RST) before any byte of the response;
 * - 'stall': the request is held open and never answered, until the rule is removed or the proxy stops.
 */
export type FaultAction = 500 | 429 | 410 | 'gone-event' | 'reset' | 'stall';

export interface FaultRule {
  match: RegExp;
  method?: string;
  action: FaultAction;
  /** How many more requests this rule applies to; unlimited when absent. */
  remaining?: number;
}

export interface FaultProxy {
  url: string;
  caPem: string;
  rules: FaultRule[];
  /** Requests seen, by "METHOD path" (query stripped), and how each was handled. */
  counts: { total: number; byPath: Map<string, number>; faults: Map<FaultAction, number> };
  /** Watches currently open through the proxy (requests with watch=true that have not ended). */
  openWatches(): number;
  openWatchPaths(): string[];
  /** Cuts every open watch (as an API server restart would). */
  dropWatches(): void;
  /** Releases stalled requests by destroying them. */
  releaseStalls(): void;
  stop(): Promise<void>;
}

const statusBody = (code: number, reason: string, message: string): string =>
  JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    code,
  });

const reasons: Record<number, string> = { 500: 'InternalError', 429: 'TooManyRequests', 410: 'Expired' };

/**
 * An HTTPS proxy in front of the real API server that injects faults per path. It terminates TLS
 * with the API server's own certificate (so clients trust it through the cluster CA) and forwards
 * the request, Authorization header included, so authentication and RBAC stay real.
 */
export async function startFaultProxy(opts: { target: TestCluster }): Promise<FaultProxy> {
  const { target } = opts;
  const upstream = new URL(target.server);
  const agent = new https.Agent({ ca: target.caPem, keepAlive: true });
  const rules: FaultRule[] = [];
  const counts = { total: 0, byPath: new Map<string, number>(), faults: new Map<FaultAction, number>() };
  const watches = new Map<ServerResponse, string>();
  const stalled = new Set<Socket>();
  const sockets = new Set<Socket>();

  const pick = (req: IncomingMessage): FaultRule | undefined => {
    const i = rules.findIndex((r) => r.match.test(req.url ?? '') && (!r.method || r.method === req.method));
    const rule = rules[i];
    if (!rule) return undefined;
    if (rule.remaining !== undefined && --rule.remaining <= 0) rules.splice(i, 1);
    return rule;
  };

  const fault = (action: FaultAction, req: IncomingMessage, res: ServerResponse): void => {
    counts.faults.set(action, (counts.faults.get(action) ?? 0) + 1);
    if (action === 'reset') {
      // A TLS socket cannot send an RST itself; the TCP socket under it (_parent) can.
      const tcp = (req.socket as Socket & { _parent?: Socket })._parent ?? req.socket;
      tcp.resetAndDestroy();
    } else if (action === 'stall') {
      stalled.add(req.socket);
    } else if (action === 'gone-event') {
      res.writeHead(200, { 'content-type': 'application/json' });
      const status = JSON.parse(statusBody(410, 'Expired', 'too old resource version')) as object;
      res.end(JSON.stringify({ type: 'ERROR', object: status }) + '\n');
    } else {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (action === 429) headers['retry-after'] = '1';
      res.writeHead(action, headers);
      res.end(statusBody(action, reasons[action] ?? 'Unknown', `injected by the fault proxy`));
    }
  };

  const forward = (req: IncomingMessage, res: ServerResponse): void => {
    const isWatch = /[?&]watch=(true|1)(&|$)/.test(req.url ?? '');
    const up = https.request(
      {
        protocol: 'https:',
        hostname: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
        agent,
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        // Node holds headers until the first body byte; a quiet watch would look unanswered.
        res.flushHeaders();
        upRes.pipe(res);
        upRes.on('error', () => res.destroy());
      },
    );
    if (isWatch) {
      watches.set(res, (req.url ?? '').split('?')[0] ?? '');
      res.on('close', () => {
        watches.delete(res);
        up.destroy();
      });
    }
    up.on('error', () => res.destroy());
    req.pipe(up);
  };

  const server = https.createServer(
    {
      cert: readFileSync(path.join(target.pkiDir, 'apiserver.crt')),
      key: readFileSync(path.join(target.pkiDir, 'apiserver.key')),
    },
    (req, res) => {
      counts.total++;
      const key = `${req.method} ${(req.url ?? '').split('?')[0]}`;
      counts.byPath.set(key, (counts.byPath.get(key) ?? 0) + 1);
      const rule = pick(req);
      if (rule) fault(rule.action, req, res);
      else forward(req, res);
    },
  );
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => {
      sockets.delete(s);
      stalled.delete(s);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `https://127.0.0.1:${port}`,
    caPem: target.caPem,
    rules,
    counts,
    openWatches: () => watches.size,
    openWatchPaths: () => [...watches.values()],
    dropWatches: () => {
      for (const res of watches.keys()) res.destroy();
    },
    releaseStalls: () => {
      for (const s of stalled) s.destroy();
      stalled.clear();
    },
    stop: async () => {
      for (const s of sockets) s.destroy();
      agent.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
