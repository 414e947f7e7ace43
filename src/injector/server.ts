import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Clock } from '../shared/clock.ts';
import { errorMessage, isOutriggerError } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { review, type PodSecurityLevel } from './admission.ts';
import { CertReloader } from './cert-reload.ts';
import type { InjectorSettings } from './settings.ts';

/** The API server caps admission bodies far below this; Istio uses the same 6 MiB bound. */
export const MAX_BODY_BYTES = 6 * 1024 * 1024;

/**
 * A connection that has not finished its TLS handshake, or sends nothing, for this long is
 * closed. Node's own defaults are 120 s for the handshake and no limit after it, which lets idle
 * connections pile up; the API server's calls take milliseconds and never idle this long
 * mid-request (keep-alive connections between calls are closed after 5 s anyway).
 */
export const IDLE_TIMEOUT_MS = 10_000;

export interface WebhookServerOptions {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  settings: InjectorSettings;
  log: Logger;
  clock: Clock;
  certPollMs?: number;
  /** See IDLE_TIMEOUT_MS. */
  idleTimeoutMs?: number;
}

export interface WebhookServer {
  readonly port: number;
  /** Re-reads the certificate now (the watch and the poll do it on their own). */
  reloadCertificate(): Promise<boolean>;
  close(): Promise<void>;
}

class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

const LEVELS: readonly string[] = ['privileged', 'baseline', 'restricted'];

/**
 * /mutate, /mutate/baseline, /mutate/restricted: the webhook entry that matched the namespace
 * tells its Pod Security level (a webhook URL may not carry a query string).
 */
export function levelForPath(pathname: string): PodSecurityLevel | undefined {
  const m = /^\/mutate(?:\/([a-z]+))?$/.exec(pathname);
  const level = m ? (m[1] ?? 'privileged') : undefined;
  return level !== undefined && LEVELS.includes(level) ? (level as PodSecurityLevel) : undefined;
}

/** `outrigger webhook`: AdmissionReview v1 over TLS on POST /mutate[/LEVEL], probes on /healthz and /readyz. */
export async function startWebhookServer(opts: WebhookServerOptions): Promise<WebhookServer> {
  const certs = new CertReloader({
    certFile: opts.certFile,
    keyFile: opts.keyFile,
    clock: opts.clock,
    log: opts.log,
    ...(opts.certPollMs === undefined ? {} : { pollMs: opts.certPollMs }),
  });
  const pair = await certs.load();
  const idleMs = opts.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
  const server = https.createServer(
    { ...pair, minVersion: 'TLSv1.2', handshakeTimeout: idleMs },
    (req, res) => {
      handle(req, res, opts).catch((e: unknown) => fail(res, e, opts.log));
    },
  );
  // The API server gives up after the webhook's timeoutSeconds anyway; slow clients get cut off.
  server.headersTimeout = 5_000;
  server.requestTimeout = 10_000;
  // headersTimeout only runs once a request has begun: a connection that never sends one needs this.
  server.timeout = idleMs;
  certs.start((next) => {
    server.setSecureContext({ ...next, minVersion: 'TLSv1.2' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  opts.log.info('webhook listening', { host: opts.host, port });
  return {
    port,
    reloadCertificate: () => certs.check(),
    close: () =>
      new Promise((resolve) => {
        certs.stop();
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

async function handle(req: IncomingMessage, res: ServerResponse, opts: WebhookServerOptions): Promise<void> {
  const url = new URL(req.url ?? '/', 'https://webhook');
  if (url.pathname === '/healthz' || url.pathname === '/readyz') {
    if (req.method !== 'GET') throw new HttpError(405, 'use GET');
    send(res, 200, 'text/plain', 'ok\n');
    return;
  }
  const level = levelForPath(url.pathname);
  if (level === undefined) throw new HttpError(404, 'not found');
  if (req.method !== 'POST') throw new HttpError(405, 'use POST');
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim();
  if (type !== 'application/json') throw new HttpError(415, 'expected application/json');
  let body: unknown;
  try {
    body = JSON.parse((await readBody(req)).toString('utf8'));
  } catch (e) {
    if (e instanceof HttpError) throw e;
    throw new HttpError(400, 'request body is not JSON');
  }
  const answer = review(body, level, opts.settings, opts.log);
  send(res, 200, 'application/json', JSON.stringify(answer));
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) return Promise.reject(new HttpError(413, 'request body too large'));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      // Past the bound the rest is drained unread, so the 413 still reaches the client.
      if (size > MAX_BODY_BYTES) reject(new HttpError(413, 'request body too large'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function fail(res: ServerResponse, e: unknown, log: Logger): void {
  if (e instanceof HttpError) {
    send(res, e.status, 'text/plain', e.message + '\n');
    return;
  }
  if (isOutriggerError(e, 'admission_invalid')) {
    send(res, 400, 'text/plain', e.message + '\n');
    return;
  }
  log.error('webhook request failed', { error: errorMessage(e) });
  send(res, 500, 'text/plain', 'internal error\n');
}
