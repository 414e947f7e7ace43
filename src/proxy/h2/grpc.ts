import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import { ERROR_HEADER, statusOf, type ProxyErrorCode } from '../status.ts';

/**
 * gRPC's view of an HTTP/2 stream (grpc/grpc doc/PROTOCOL-HTTP2.md): which streams are gRPC calls,
 * their deadline, and the Trailers-Only answers the proxy gives when it fails a call itself.
 */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  DEADLINE_EXCEEDED: 4,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

export function isGrpc(headers: IncomingHttpHeaders): boolean {
  const ct = headers['content-type'];
  return typeof ct === 'string' && /^application\/grpc(?:$|[+;])/i.test(ct);
}

const UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 };

/**
 * The `grpc-timeout` header in milliseconds: up to 8 digits and one unit. Undefined when absent
 * (no deadline); a malformed value is an error the caller answers with INTERNAL, as grpc servers do.
 */
function parseGrpcTimeout(value: string | string[] | undefined): number | undefined | Error {
  if (value === undefined) return undefined;
  const v = Array.isArray(value) ? value[0] : value;
  const m = /^(\d{1,8})([HMSmun])$/.exec(v ?? '');
  if (!m)
    return new Error(`grpc-timeout ${JSON.stringify(v)} is not 1-8 digits followed by H, M, S, m, u or n`);
  return Number(m[1]) * (UNIT_MS[m[2] as string] as number);
}

/**
 * What every HTTP/2 entry (sidecar and gateway) checks before routing a stream: the call's
 * deadline (a gRPC call's grpc-timeout, in ms), or why the stream is refused as a bad request.
 * CONNECT (RFC 9113 section 8.5 tunnels, RFC 8441 WebSockets) is not proxied.
 */
export function streamDeadline(headers: IncomingHttpHeaders, grpc: boolean): number | undefined | Error {
  if (headers[':method'] === 'CONNECT') return new Error('CONNECT over HTTP/2 is not supported');
  return grpc ? parseGrpcTimeout(headers['grpc-timeout']) : undefined;
}

/** A remaining deadline as a grpc-timeout value (whole milliseconds, rounded up, at least 1). */
export function formatGrpcTimeout(ms: number): string {
  const n = Math.max(1, Math.ceil(ms));
  return n < 1e8 ? `${n}m` : `${Math.ceil(n / 1000)}S`;
}

/** The gRPC status a proxy error becomes: connect failures and a Service without endpoints are UNAVAILABLE. */
export function grpcStatusOf(code: ProxyErrorCode): number {
  switch (code) {
    case 'no_endpoints':
    case 'upstream_failed':
      return GrpcStatus.UNAVAILABLE;
    case 'upstream_timeout':
      return GrpcStatus.DEADLINE_EXCEEDED;
    case 'egress_denied':
    case 'misdirected':
      return GrpcStatus.PERMISSION_DENIED;
    case 'loop_detected':
      return GrpcStatus.INTERNAL;
    case 'bad_request':
    case 'headers_too_large':
      return GrpcStatus.INTERNAL;
    case 'request_timeout':
      return GrpcStatus.DEADLINE_EXCEEDED;
    // Mutual TLS and the identity issuer's answers.
    case 'mesh_caller_denied':
    case 'identity_forbidden':
      return GrpcStatus.PERMISSION_DENIED;
    case 'identity_token_rejected':
      return GrpcStatus.UNAUTHENTICATED;
    case 'identity_review_unavailable':
      return GrpcStatus.UNAVAILABLE;
    case 'identity_request_invalid':
      return GrpcStatus.INTERNAL;
    // The gateway's 404: gRPC maps HTTP 404 to UNIMPLEMENTED (doc/http-grpc-status-mapping.md).
    case 'no_route':
      return GrpcStatus.UNIMPLEMENTED;
    case 'route_backend_invalid':
      return GrpcStatus.INTERNAL;
  }
}

/** The gRPC status of an upstream stream reset before its response (PROTOCOL-HTTP2.md's table). */
export function grpcStatusOfReset(rstCode: number): number {
  if (rstCode === 0x7 /* REFUSED_STREAM */) return GrpcStatus.UNAVAILABLE;
  if (rstCode === 0x8 /* CANCEL */) return GrpcStatus.CANCELLED;
  if (rstCode === 0xb /* ENHANCE_YOUR_CALM */) return GrpcStatus.RESOURCE_EXHAUSTED;
  return GrpcStatus.INTERNAL;
}

/** grpc-message is percent-encoded UTF-8: everything outside printable ASCII, and '%' itself. */
export function encodeGrpcMessage(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * The headers of a proxy error. A gRPC call gets Trailers-Only (HTTP 200 and grpc-status, what
 * gRPC clients read); any other HTTP/2 request gets the HTTP status of the one table.
 */
export function errorHeaders(
  grpc: boolean,
  code: ProxyErrorCode,
  detail: string,
  grpcStatus = grpcStatusOf(code),
): OutgoingHttpHeaders {
  if (grpc)
    return {
      ':status': 200,
      'content-type': 'application/grpc',
      'grpc-status': String(grpcStatus),
      'grpc-message': encodeGrpcMessage(detail),
      [ERROR_HEADER]: code,
    };
  return { ':status': statusOf[code], 'content-type': 'text/plain; charset=utf-8', [ERROR_HEADER]: code };
}
