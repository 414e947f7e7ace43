import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { Clock } from '../../shared/clock.ts';
import { errorMessage } from '../../shared/errors.ts';
import type { Logger } from '../../shared/log.ts';
import { ThrottledLog } from '../../shared/log-throttle.ts';
import type { ForwardPlan } from '../forward.ts';
import { upstreamRequestHeaders } from '../headers.ts';
import { endOnce, type Direction, type Hop, type HopObserver, type PeerIdentity } from '../observer.ts';
import type { ProxyErrorCode } from '../status.ts';
import { answerError, ignore, type H2Forwarder, type H2Result } from './forward.ts';
import { GrpcStatus, isGrpc, streamDeadline } from './grpc.ts';
import { rpcOfPath } from '../../routes/grpc-match.ts';

/**
 * The streams of one listener's HTTP/2 connections: each is routed on its own (route), then
 * forwarded. Routing is the listener's business (egress: the Service at :authority or the original
 * destination; ingress: the app), so both directions share everything else.
 */
export type H2Route =
  | {
      kind: 'error';
      code: ProxyErrorCode;
      detail: string;
      service?: string;
      stale?: boolean;
      /** A gRPC call's status, when not the code's own (a GRPCRoute's invalid backend: UNAVAILABLE). */
      grpcStatus?: number;
    }
  /** A route's RequestRedirect, answered at once. */
  | { kind: 'redirect'; status: number; location: string }
  | {
      kind: 'plan';
      plan: ForwardPlan;
      service?: string;
      stale?: boolean;
      headers?: (h: OutgoingHttpHeaders) => void;
    };

export interface H2StreamContext {
  stream: ServerHttp2Stream;
  headers: IncomingHttpHeaders;
  /** The downstream connection (for its peer and original destination). */
  socket: Socket;
}

export interface H2HandlerOptions {
  direction: Direction;
  forwarder: H2Forwarder;
  observer: HopObserver;
  log: Logger;
  clock: Clock;
  /** Synchronous when it can answer at once (discovery knows the Service): no promise per stream. */
  route(ctx: H2StreamContext): H2Route | Promise<H2Route>;
  /** The caller's verified mesh identity on a connection, for spans and metric labels. */
  peer?: (socket: Socket) => PeerIdentity | undefined;
}

export class H2Handler {
  readonly #o: H2HandlerOptions;
  readonly #problems: ThrottledLog;

  constructor(o: H2HandlerOptions) {
    this.#o = o;
    this.#problems = new ThrottledLog(o.log, o.clock);
  }

  readonly onStream = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, socket: Socket): void => {
    stream.on('error', ignore);
    const grpc = isGrpc(headers);
    const hop = this.#startHop(headers, socket, grpc);
    try {
      this.#handle({ stream, headers, socket }, grpc, hop);
    } catch (e) {
      this.#crashed(stream, grpc, hop, e);
    }
  };

  #crashed(stream: ServerHttp2Stream, grpc: boolean, hop: Hop, e: unknown): void {
    this.#o.log.error('HTTP/2 stream failed unexpectedly', { error: errorMessage(e) });
    answerError(stream, grpc, 'upstream_failed', 'internal proxy error');
    hop.end({ status: 0, errorCode: 'upstream_failed', errorMessage: errorMessage(e) });
  }

  /** Synchronous while routing is (no promise per stream but the forward's own). */
  #handle(ctx: H2StreamContext, grpc: boolean, hop: Hop): void {
    const timeout = streamDeadline(ctx.headers, grpc);
    if (timeout instanceof Error) return this.#refuse(ctx, grpc, hop, 'bad_request', timeout.message);
    const routed = this.#o.route(ctx);
    if (!(routed instanceof Promise)) return this.#routed(ctx, grpc, hop, timeout, routed);
    routed.then(
      (route) => this.#routed(ctx, grpc, hop, timeout, route),
      (e: unknown) => this.#crashed(ctx.stream, grpc, hop, e),
    );
  }

  #routed(ctx: H2StreamContext, grpc: boolean, hop: Hop, timeout: number | undefined, route: H2Route): void {
    const { stream } = ctx;
    if (route.kind === 'redirect') {
      stream.respond({ ':status': route.status, location: route.location }, { endStream: true });
      return hop.end({ status: route.status });
    }
    if (route.service) hop.setService(route.service);
    if (route.stale) hop.setStale(true);
    if (route.kind === 'error')
      return this.#refuse(ctx, grpc, hop, route.code, route.detail, route.service, route.grpcStatus);
    const up = requestHeaders(ctx.headers, ctx.socket.remoteAddress);
    route.headers?.(up);
    const call = {
      down: stream,
      headers: up,
      grpc,
      ...(timeout === undefined ? {} : { timeoutMs: timeout }),
    };
    this.#o.forwarder.forward(call, route.plan, hop).then(
      (r) => this.#forwarded(r, route.service, hop),
      (e: unknown) => this.#crashed(stream, grpc, hop, e),
    );
  }

  #forwarded(r: H2Result, service: string | undefined, hop: Hop): void {
    if (r.errorCode && r.status !== 0)
      this.#problems.warn(`${r.errorCode}\u0000${service ?? ''}`, `${this.#o.direction} stream failed`, {
        service,
        code: r.errorCode,
        cause: r.errorMessage,
      });
    hop.end(r);
  }

  #refuse(
    ctx: H2StreamContext,
    grpc: boolean,
    hop: Hop,
    code: ProxyErrorCode,
    detail: string,
    service?: string,
    grpcStatus?: number,
  ): void {
    refuseStream(ctx.stream, grpc, hop, code, detail, grpcStatus);
    this.#problems.warn(`${code}\u0000${service ?? ''}`, `${this.#o.direction} stream refused`, {
      service,
      code,
      cause: detail,
    });
  }

  #startHop(headers: IncomingHttpHeaders, socket: Socket, grpc: boolean): Hop {
    return endOnce(
      this.#o.observer.startHop({
        direction: this.#o.direction,
        method: String(headers[':method'] ?? ''),
        target: String(headers[':path'] ?? ''),
        authority: String(headers[':authority'] ?? headers.host ?? ''),
        headers,
        ...(socket.remoteAddress ? { peerAddress: socket.remoteAddress } : {}),
        protocol: 'http',
        ...(this.#o.peer ? { peer: this.#o.peer(socket) } : {}),
        ...(grpc ? { rpc: rpcOf(String(headers[':path'] ?? '')) } : {}),
      }),
    );
  }
}

/**
 * Answers a stream with a proxy error and ends its hop: Trailers-Only with a gRPC status for gRPC
 * (INTERNAL for a malformed request, as gRPC servers answer one), else the HTTP status and body.
 */
export function refuseStream(
  stream: ServerHttp2Stream,
  grpc: boolean,
  hop: Hop,
  code: ProxyErrorCode,
  detail: string,
  /** A gRPC call's status, when not the code's own (a GRPCRoute's invalid backend: UNAVAILABLE). */
  grpcStatus: number | undefined = code === 'bad_request' ? GrpcStatus.INTERNAL : undefined,
): void {
  const h = answerError(stream, grpc, code, detail, grpcStatus);
  hop.end({
    status: Number(h[':status']),
    errorCode: code,
    errorMessage: detail,
    ...(grpc ? { grpcStatus: Number(h['grpc-status']) } : {}),
  });
}

/**
 * The upstream request's headers: hop-by-hop ones removed and the peer appended to
 * X-Forwarded-For as on HTTP/1; `te: trailers` stays, gRPC servers require it.
 */
function requestHeaders(headers: IncomingHttpHeaders, peer: string | undefined): OutgoingHttpHeaders {
  const out = upstreamRequestHeaders(headers, peer);
  if (headers.te === 'trailers') out.te = 'trailers';
  return out;
}

/** A gRPC call's service and method for its span; empty for a path that is not `/service/method`. */
export const rpcOf = (path: string): { service: string; method: string } =>
  rpcOfPath(path) ?? { service: '', method: '' };
