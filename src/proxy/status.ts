import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ErrorCode } from '../shared/errors.ts';
import { bodyUnread } from './headers.ts';

/**
 * THE one mapping of error codes to HTTP statuses (src/shared/errors.ts points here). Every
 * proxy-generated error carries a short plain-text body and the stable code in x-outrigger-error,
 * like Linkerd's l5d-proxy-error, so a client can tell the sidecar's answers from the app's.
 */
export type ProxyErrorCode = Extract<
  ErrorCode,
  | 'no_endpoints'
  | 'upstream_failed'
  | 'upstream_timeout'
  | 'egress_denied'
  | 'loop_detected'
  | 'misdirected'
  | 'bad_request'
  | 'headers_too_large'
  | 'request_timeout'
  | 'identity_request_invalid'
  | 'identity_token_rejected'
  | 'identity_forbidden'
  | 'identity_review_unavailable'
  | 'mesh_caller_denied'
  | 'no_route'
  | 'route_backend_invalid'
>;

export const statusOf: Readonly<Record<ProxyErrorCode, number>> = {
  no_endpoints: 503,
  upstream_failed: 502,
  upstream_timeout: 504,
  egress_denied: 403,
  // RFC 5842's 508 Loop Detected: unlike a 502, it tells the client that retrying cannot help.
  loop_detected: 508,
  // RFC 9110 section 15.5.20: the connection reached a listener that does not serve its
  // destination (not redirected to it, or not addressed to this pod).
  misdirected: 421,
  bad_request: 400,
  headers_too_large: 431,
  request_timeout: 408,
  // The certificate issuer's answers (outrigger identity): the token decides 401, the CSR 400/403.
  identity_request_invalid: 400,
  identity_token_rejected: 401,
  identity_forbidden: 403,
  identity_review_unavailable: 503,
  // A meshed caller whose identity outrigger.dev/allow-from does not list.
  mesh_caller_denied: 403,
  // The gateway: no Ingress rule and no default backend for the host and path.
  no_route: 404,
  // The gateway, Gateway API: the chosen backendRef cannot be used (another kind, another
  // namespace without a ReferenceGrant, a Service that does not exist) or every weight is 0. The
  // spec answers these 500, in proportion to the backend's weight.
  route_backend_invalid: 500,
};

export const ERROR_HEADER = 'x-outrigger-error';

const reasons: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  408: 'Request Timeout',
  421: 'Misdirected Request',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  508: 'Loop Detected',
};

/** Client errors leave the connection in an unknown state (framing): close it after answering. */
const CLOSES: ReadonlySet<ProxyErrorCode> = new Set([
  'bad_request',
  'headers_too_large',
  'request_timeout',
  // Every request on a misdirected connection would be misdirected too.
  'misdirected',
]);

/** Answers a request with a proxy error; safe to call when headers were already sent (it resets). */
export function sendError(
  res: ServerResponse,
  code: ProxyErrorCode,
  detail: string,
  close = CLOSES.has(code),
): number {
  const status = statusOf[code];
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return status;
  }
  const body = `${detail}\n`;
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    [ERROR_HEADER]: code,
    // An answer before the request body was read: the listener closes the connection after it.
    ...(close || bodyUnread(res.req) ? { connection: 'close' } : {}),
  });
  res.end(body);
  return status;
}

/** The same answer written on a raw socket (parse errors, failed CONNECT and upgrades); closes it. */
export function writeSocketError(socket: Socket, code: ProxyErrorCode, detail: string): number {
  const status = statusOf[code];
  if (socket.writable) {
    const body = `${detail}\n`;
    socket.end(
      `HTTP/1.1 ${status} ${reasons[status] ?? 'Error'}\r\ncontent-type: text/plain; charset=utf-8\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n${ERROR_HEADER}: ${code}\r\nconnection: close\r\n\r\n${body}`,
    );
  } else {
    socket.destroy();
  }
  return status;
}
