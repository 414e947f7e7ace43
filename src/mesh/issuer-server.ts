import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ERROR_HEADER, statusOf, type ProxyErrorCode } from '../proxy/status.ts';
import type { Clock, Timer } from '../shared/clock.ts';
import { errorMessage, isOutriggerError, OutriggerError } from '../shared/errors.ts';
import { listenOn } from '../shared/listen.ts';
import type { Logger } from '../shared/log.ts';
import type { IssuingCa } from './ca.ts';
import { CERTIFY_PATH } from './issuer-client.ts';
import { IssuerRefusal, refusalReason, type Issuer, type IssuerObserver } from './issuer.ts';
import { generateP256, privateKeyPem, signLeaf } from './x509.ts';

const MAX_BODY_BYTES = 64 * 1024;
/** The issuer's own serving certificate: signed by the mesh CA, so sidecars trust it with the bundle. */
const SERVING_TTL_MS = 7 * 24 * 3600_000;

export interface IssuerServerOptions {
  host: string;
  port: number;
  issuer: Issuer;
  ca: IssuingCa;
  /** DNS names of the issuer's Service, for its serving certificate. */
  servingNames: readonly string[];
  clock: Clock;
  log: Logger;
  observer?: IssuerObserver;
}

export interface IssuerServer {
  readonly port: number;
  stats(): Record<string, number>;
  close(): Promise<void>;
}

/**
 * `outrigger identity` over HTTPS: POST /v1/certificates with `authorization: Bearer <token of
 * audience outrigger-identity>` and `{"csr": "<PEM>"}`; 200 with the certificate, or a status and
 * a stable code (x-outrigger-error and the JSON body) saying why not.
 */
export async function startIssuerServer(opts: IssuerServerOptions): Promise<IssuerServer> {
  const counts = new Map<string, number>();
  const count = (k: string): void => void counts.set(k, (counts.get(k) ?? 0) + 1);
  const serving = async (): Promise<{ key: string; cert: string }> => {
    const keys = await generateP256();
    const now = opts.clock.now();
    const cert = await signLeaf(opts.ca.signer, {
      publicKey: keys.publicKey,
      dns: opts.servingNames,
      notBefore: new Date(now - 60_000),
      notAfter: new Date(Math.min(now + SERVING_TTL_MS, opts.ca.notAfter)),
    });
    return { key: privateKeyPem(keys.privateKey), cert: [cert, ...opts.ca.chain].join('\n') };
  };
  const server = https.createServer({ ...(await serving()), minVersion: 'TLSv1.3' }, (req, res) => {
    handle(req, res, opts.issuer)
      .then((issued) => {
        if (!issued) return;
        count('issued');
        opts.observer?.issued();
      })
      .catch((e: unknown) => {
        const code = isOutriggerError(e) && e.code in statusOf ? (e.code as ProxyErrorCode) : undefined;
        count(code ?? 'internal');
        opts.observer?.refused(refusalReason(e));
        if (!code) opts.log.error('certificate request failed', { error: errorMessage(e) });
        else opts.log.info('certificate refused', { code, reason: errorMessage(e) });
        sendJson(res, code ? statusOf[code] : 500, {
          code: code ?? 'internal',
          message: code ? errorMessage(e) : 'internal error',
        });
      });
  });
  server.headersTimeout = 5_000;
  server.requestTimeout = 15_000;
  server.timeout = 30_000;
  let renewal: Timer | undefined;
  const renew = (): void => {
    renewal = opts.clock.setTimer(SERVING_TTL_MS / 2, () => {
      serving()
        .then((pair) => server.setSecureContext({ ...pair, minVersion: 'TLSv1.3' }))
        .catch((e: unknown) =>
          opts.log.error('cannot renew the serving certificate', { error: errorMessage(e) }),
        )
        .finally(renew);
    });
  };
  renew();
  await listenOn(server, opts.port, opts.host);
  const port = (server.address() as AddressInfo).port;
  opts.log.info('identity issuer listening', { host: opts.host, port });
  return {
    port,
    stats: () => Object.fromEntries(counts),
    close: () =>
      new Promise((resolve) => {
        renewal?.cancel();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Answers one request; true when it issued a certificate. */
async function handle(req: IncomingMessage, res: ServerResponse, issuer: Issuer): Promise<boolean> {
  const url = new URL(req.url ?? '/', 'https://issuer');
  if (url.pathname === '/healthz' && req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    return false;
  }
  if (url.pathname !== CERTIFY_PATH || req.method !== 'POST') throw invalid(`use POST ${CERTIFY_PATH}`);
  const m = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  const body = await readJson(req);
  if (!m?.[1])
    throw new IssuerRefusal(
      'identity_token_rejected',
      'token_missing',
      'missing authorization: Bearer <token>',
    );
  const csr = (body as { csr?: unknown } | null)?.csr;
  if (typeof csr !== 'string') throw invalid('body must be JSON {"csr": "<PEM certificate request>"}');
  const c = await issuer.certify(m[1], csr);
  sendJson(res, 200, {
    spiffeId: c.spiffeId,
    certificate: c.certificate,
    chain: c.chain,
    trustBundle: c.trustBundle,
    notBefore: new Date(c.notBefore).toISOString(),
    notAfter: new Date(c.notAfter).toISOString(),
  });
  return true;
}

const invalid = (msg: string): OutriggerError => new OutriggerError('identity_request_invalid', msg);

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) reject(invalid(`request body larger than ${MAX_BODY_BYTES} bytes`));
      else chunks.push(c);
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        reject(invalid('request body is not JSON'));
      }
    });
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...(status >= 400 ? { [ERROR_HEADER]: String(body.code) } : {}),
  });
  res.end(text);
}
