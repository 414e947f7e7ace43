import { Agent as HttpAgent, request as httpRequest } from '../shared/node-http.ts';
import {
  connect as h2connect,
  constants as h2c,
  type ClientHttp2Session,
  type ClientHttp2Stream,
} from 'node:http2';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { isIP } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { KubeConnection } from './connection.ts';

/** One HTTP exchange as the transport needs it: the status and a readable body. */
export interface RawResponse {
  status: number;
  body: Readable;
  /** The Retry-After header, if any (429 and 503 answers). */
  retryAfter?: string;
}

/** A request with a body (the gateway's status writes); lists and watches are GETs without one. */
export interface SendBody {
  method: 'PATCH';
  data: string;
  /** The patch's media type (default: a JSON merge patch). */
  contentType?: string;
}

export interface Sender {
  send(url: URL, headers: Record<string, string>, signal: AbortSignal, body?: SendBody): Promise<RawResponse>;
  close(): void;
}

export const tlsOptions = (conn: KubeConnection) => ({
  ca: conn.ca,
  cert: conn.cert,
  key: conn.key,
  ...(conn.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
});

const retryAfterOf = (v: string | string[] | undefined): { retryAfter?: string } =>
  typeof v === 'string' ? { retryAfter: v } : {};

/** HTTP/1.1 with a keep-alive agent: one connection per concurrent watch. */
export function http1Sender(conn: KubeConnection): Sender {
  const secure = conn.server.protocol === 'https:';
  const opts = { keepAlive: true, keepAliveMsecs: 30_000, maxFreeSockets: 4 };
  const agent = secure ? new HttpsAgent({ ...opts, ...tlsOptions(conn) }) : new HttpAgent(opts);
  return {
    send: (url, headers, signal, body) =>
      new Promise((resolve, reject) => {
        const method = body?.method ?? 'GET';
        const req = (secure ? httpsRequest : httpRequest)(url, { agent, headers, signal, method }, (res) =>
          resolve({ status: res.statusCode ?? 0, body: res, ...retryAfterOf(res.headers['retry-after']) }),
        );
        req.on('error', reject);
        req.end(body?.data);
      }),
    close: () => agent.destroy(),
  };
}

interface Session {
  s: ClientHttp2Session;
  active: number;
  usable: boolean;
}

const PING_EVERY_MS = 30_000;
const PING_TIMEOUT_MS = 15_000;

/**
 * HTTP/2, as client-go speaks to the API server: every watch is a stream, so a sidecar with 100
 * subscriptions holds one TLS connection instead of 101 (~0.25 MB RSS each, measured). A new
 * connection is opened when one reaches the server's stream limit (capped at 100). Since one dead
 * connection would silence every watch at once, each is pinged every 30 s and dropped after 15 s
 * without an answer (client-go's ReadIdleTimeout/PingTimeout), which fails its watches over to
 * the reflectors' normal retry.
 */
export function http2Sender(conn: KubeConnection): Sender {
  const sessions: Session[] = [];
  const origin = conn.server.origin;

  const open = (): Session => {
    const s = h2connect(origin, tlsOptions(conn));
    const entry: Session = { s, active: 0, usable: true };
    const drop = (): void => {
      entry.usable = false;
      const i = sessions.indexOf(entry);
      if (i >= 0) sessions.splice(i, 1);
    };
    s.on('error', drop);
    s.on('goaway', drop);
    s.on('close', () => {
      drop();
      clearInterval(pinger);
    });
    const pinger = setInterval(() => {
      const timeout = setTimeout(() => s.destroy(new Error('HTTP/2 ping timed out')), PING_TIMEOUT_MS);
      timeout.unref();
      const ok = s.ping((err) => {
        clearTimeout(timeout);
        if (err) s.destroy(err);
      });
      if (!ok) clearTimeout(timeout);
    }, PING_EVERY_MS);
    pinger.unref();
    sessions.push(entry);
    return entry;
  };

  const pick = (): Session => {
    for (const e of sessions) {
      const limit = Math.min(e.s.remoteSettings.maxConcurrentStreams ?? 100, 100);
      if (e.usable && !e.s.destroyed && e.active < limit) return e;
    }
    return open();
  };

  return {
    send: (url, headers, signal, body) =>
      new Promise((resolve, reject) => {
        const entry = pick();
        let stream: ClientHttp2Stream;
        try {
          stream = entry.s.request(
            {
              [h2c.HTTP2_HEADER_METHOD]: body?.method ?? 'GET',
              [h2c.HTTP2_HEADER_PATH]: url.pathname + url.search,
              ...headers,
            },
            { signal, endStream: body === undefined },
          );
          if (body) stream.end(body.data);
        } catch (e) {
          entry.usable = false;
          reject(e instanceof Error ? e : new Error(String(e)));
          return;
        }
        entry.active++;
        let answered = false;
        stream.once('response', (h) => {
          answered = true;
          resolve({
            status: Number(h[h2c.HTTP2_HEADER_STATUS]),
            body: stream,
            ...retryAfterOf(h[h2c.HTTP2_HEADER_RETRY_AFTER]),
          });
        });
        stream.once('error', (e: Error) => {
          if (!answered) reject(e);
        });
        stream.once('close', () => {
          entry.active--;
          if (!answered) reject(new Error(`HTTP/2 stream closed before a response (code ${stream.rstCode})`));
        });
      }),
    close: () => {
      for (const e of [...sessions]) e.s.destroy();
    },
  };
}

/**
 * The protocol to speak: h2 unless a TLS handshake succeeds WITHOUT h2 in ALPN (an HTTP/1.1-only
 * proxy in front of the API server, such as the test fault proxy). A server that cannot be reached
 * now (a sidecar starting during an outage) gets h2, which every kube-apiserver speaks.
 */
export function chooseProtocol(conn: KubeConnection, timeoutMs = 5_000): Promise<'h1' | 'h2'> {
  if (conn.server.protocol !== 'https:') return Promise.resolve('h1');
  return new Promise((resolve) => {
    const host = conn.server.hostname.replace(/^\[|\]$/g, '');
    const socket = tlsConnect({
      host,
      port: Number(conn.server.port || 443),
      ...(isIP(host) === 0 ? { servername: host } : {}),
      ALPNProtocols: ['h2', 'http/1.1'],
      ...tlsOptions(conn),
    });
    const done = (v: 'h1' | 'h2'): void => {
      socket.destroy();
      resolve(v);
    };
    socket.setTimeout(timeoutMs, () => done('h2'));
    socket.once('secureConnect', () => done(socket.alpnProtocol === 'h2' ? 'h2' : 'h1'));
    socket.once('error', () => done('h2'));
  });
}
