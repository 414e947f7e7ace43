import type { OutgoingHttpHeaders } from 'node:http';
import {
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_METHOD_ORIGINAL,
  ATTR_HTTP_REQUEST_RESEND_COUNT,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_NETWORK_PEER_ADDRESS,
  ATTR_NETWORK_PEER_PORT,
  ATTR_NETWORK_PROTOCOL_NAME,
  ATTR_NETWORK_TRANSPORT,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
} from '@opentelemetry/semantic-conventions';
import type { Hop, HopEnd, HopStart } from './hop.ts';
import { inject, type Extracted, type Format } from './propagation.ts';

/** Outrigger's own span attributes (docs/tracing.md). */
export const ATTR_STALE = 'outrigger.discovery.stale';
export const ATTR_ENDPOINT = 'outrigger.endpoint';
export const ATTR_SERVICE = 'outrigger.service';
export const ATTR_DIRECTION = 'outrigger.direction';
export const ATTR_RETRY_REASON = 'outrigger.retry.reason';
export const ATTR_RETRY_ATTEMPT = 'outrigger.retry.attempt';
/** The caller's verified SPIFFE id on a server span (mutual TLS); OpenTelemetry has no such key. */
export const ATTR_PEER_IDENTITY = 'outrigger.peer.identity';
/** OpenTelemetry's RPC conventions (still incubating in the semantic-conventions package). */
export const ATTR_RPC_SYSTEM = 'rpc.system';
export const ATTR_RPC_SERVICE = 'rpc.service';
export const ATTR_RPC_METHOD = 'rpc.method';
export const ATTR_RPC_GRPC_STATUS_CODE = 'rpc.grpc.status_code';

const KNOWN_METHODS = new Set([
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'DELETE',
  'CONNECT',
  'OPTIONS',
  'TRACE',
  'PATCH',
]);

/**
 * One span per request per sidecar, as Linkerd and Envoy do: a SERVER span for ingress, a CLIENT
 * span for egress. Retries are events on that span, not child spans, so a trace keeps one span
 * per proxy hop however many endpoints were tried.
 */
export class SpanHop implements Hop {
  readonly #span: Span;
  readonly #ctx: Context;
  readonly #present: readonly Format[];
  readonly #egress: boolean;
  #endpoint: string | undefined;
  #retries = 0;
  #ended = false;

  constructor(tracer: Tracer, info: HopStart, parent: Extracted) {
    this.#present = parent.present;
    this.#egress = info.direction === 'egress';
    const http = info.protocol === 'http';
    const method = methodOf(info.method);
    const kind = this.#egress ? SpanKind.CLIENT : SpanKind.SERVER;
    this.#span = tracer.startSpan(spanName(info, http, method), { kind }, parent.context);
    // Our sampler ignores attributes, so they are built only for spans that will be recorded:
    // most hops at a low ratio are unsampled and pay for context propagation alone.
    if (this.#span.isRecording()) this.#span.setAttributes(startAttributes(info, method, this.#egress));
    this.#ctx = trace.setSpan(parent.context, this.#span);
  }

  setService(service: string): void {
    this.#span.setAttribute(ATTR_SERVICE, service);
  }

  setEndpoint(address: string, port: number): void {
    this.#endpoint = address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
    this.#span.setAttributes({
      [ATTR_NETWORK_PEER_ADDRESS]: address,
      [ATTR_NETWORK_PEER_PORT]: port,
      [ATTR_ENDPOINT]: this.#endpoint,
    });
  }

  addRetry(reason: string): void {
    this.#retries++;
    const attrs: Attributes = { [ATTR_RETRY_REASON]: reason, [ATTR_RETRY_ATTEMPT]: this.#retries };
    if (this.#endpoint) attrs[ATTR_ENDPOINT] = this.#endpoint;
    this.#span.addEvent('retry', attrs);
  }

  setStale(stale: boolean): void {
    this.#span.setAttribute(ATTR_STALE, stale);
  }

  inject(headers: OutgoingHttpHeaders): void {
    inject(this.#ctx, this.#present, headers);
  }

  end(result: HopEnd): void {
    if (this.#ended) return;
    this.#ended = true;
    const span = this.#span;
    if (result.status > 0) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, result.status);
    if (result.grpcStatus !== undefined) span.setAttribute(ATTR_RPC_GRPC_STATUS_CODE, result.grpcStatus);
    if (this.#retries > 0) span.setAttribute(ATTR_HTTP_REQUEST_RESEND_COUNT, this.#retries);
    const errorType = errorTypeOf(result, this.#egress);
    if (errorType !== undefined) {
      span.setAttribute(ATTR_ERROR_TYPE, errorType);
      span.setStatus({ code: SpanStatusCode.ERROR, message: result.errorMessage ?? errorType });
    }
    span.end();
  }
}

/** UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS. */
const GRPC_SERVER_ERRORS: ReadonlySet<number> = new Set([2, 4, 12, 13, 14, 15]);

/** A gRPC call is named `service/method` (RPC conventions), an HTTP request by its method. */
function spanName(info: HopStart, http: boolean, method: string): string {
  if (info.rpc?.service) return `${info.rpc.service}/${info.rpc.method}`;
  return http ? method : 'TCP';
}

/** Semantic conventions: unknown methods become `_OTHER`, keeping span names low-cardinality. */
function methodOf(method: string): string {
  const m = method.toUpperCase();
  return KNOWN_METHODS.has(m) ? m : '_OTHER';
}

/**
 * Query strings are left out on purpose: they often carry tokens, and a sidecar cannot know which
 * parameters are sensitive. The path alone identifies the operation.
 */
function startAttributes(info: HopStart, method: string, egress: boolean): Attributes {
  const attrs: Attributes = { [ATTR_DIRECTION]: info.direction };
  const target = parseTarget(info.target, info.authority);
  if (target.host) attrs[ATTR_SERVER_ADDRESS] = target.host;
  if (target.port !== undefined) attrs[ATTR_SERVER_PORT] = target.port;
  if (info.peerAddress && !egress) attrs[ATTR_CLIENT_ADDRESS] = info.peerAddress;
  if (info.peer && !egress) attrs[ATTR_PEER_IDENTITY] = info.peer.id;
  if (info.protocol === 'tcp') {
    attrs[ATTR_NETWORK_TRANSPORT] = 'tcp';
    return attrs;
  }
  attrs[ATTR_HTTP_REQUEST_METHOD] = method;
  if (method === '_OTHER') attrs[ATTR_HTTP_REQUEST_METHOD_ORIGINAL] = info.method;
  attrs[ATTR_NETWORK_PROTOCOL_NAME] = 'http';
  attrs[ATTR_URL_SCHEME] = 'http';
  attrs[ATTR_URL_PATH] = target.path;
  if (info.rpc) {
    attrs[ATTR_RPC_SYSTEM] = 'grpc';
    attrs[ATTR_RPC_SERVICE] = info.rpc.service;
    attrs[ATTR_RPC_METHOD] = info.rpc.method;
  }
  if (egress && target.authority) attrs[ATTR_URL_FULL] = `http://${target.authority}${target.path}`;
  return attrs;
}

/**
 * An absolute-form target (explicit capture, HTTP_PROXY) names the authority itself, and per
 * RFC 9112 section 3.2.2 it wins over the Host header; origin-form targets take the Host.
 */
function parseTarget(
  target: string,
  hostHeader: string,
): { authority: string; host: string; port?: number; path: string } {
  if (/^https?:\/\//i.test(target)) {
    try {
      const u = new URL(target);
      const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
      const port = u.port ? Number(u.port) : undefined;
      return port === undefined
        ? { authority: u.host, host, path: u.pathname }
        : { authority: u.host, host, port, path: u.pathname };
    } catch {
      return { authority: hostHeader, ...splitAuthority(hostHeader), path: '/' };
    }
  }
  const q = target.indexOf('?');
  return {
    authority: hostHeader,
    ...splitAuthority(hostHeader),
    path: q === -1 ? target : target.slice(0, q),
  };
}

export function splitAuthority(authority: string): { host: string; port?: number } {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(authority) ?? /^([^:]*)(?::(\d+))?$/.exec(authority);
  if (!m) return { host: authority };
  const port = m[2] === undefined ? undefined : Number(m[2]);
  return port === undefined ? { host: m[1] ?? '' } : { host: m[1] ?? '', port };
}

/**
 * The proxy's own error code wins; otherwise the status decides. Semantic conventions: a CLIENT
 * span is in error for 4xx and 5xx, a SERVER span only for 5xx (a 404 is the server working).
 */
function errorTypeOf(result: HopEnd, egress: boolean): string | undefined {
  if (result.errorCode) return result.errorCode;
  // RPC conventions: any non-OK status fails a client span; a server span only the server's faults.
  const g = result.grpcStatus;
  if (g !== undefined && g !== 0 && (egress || GRPC_SERVER_ERRORS.has(g))) return String(g);
  if (result.status >= 500 || (egress && result.status >= 400)) return String(result.status);
  return undefined;
}
