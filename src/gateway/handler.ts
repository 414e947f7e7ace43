import type { IncomingMessage, ServerResponse } from 'node:http';
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Clock } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { ThrottledLog } from '../shared/log-throttle.ts';
import type { Forwarder, ForwardPlan } from '../proxy/forward.ts';
import { expectsContinue, toOriginForm, upstreamRequestHeaders } from '../proxy/headers.ts';
import { normalisePath } from '../routes/path.ts';
import { startRequestHop, type Hop, type HopObserver } from '../proxy/observer.ts';
import type { H2Forwarder } from '../proxy/h2/forward.ts';
import { GrpcStatus, isGrpc, streamDeadline } from '../proxy/h2/grpc.ts';
import { refuseStream, rpcOf } from '../proxy/h2/handler.ts';
import { speaksH2c } from '../proxy/h2/routes.ts';
import { sendError, statusOf, writeSocketError, type ProxyErrorCode } from '../proxy/status.ts';
import { planBackend, type BackendDecision, type BackendPolicy } from './backend.ts';
import type { GatewayHandler } from './listeners.ts';
import { normalizeHost, type RouteTable } from './table.ts';
import type { GatewayRouteTable, Selected } from '../routes/table.ts';
import { httpRouteAction } from '../routes/action.ts';
import { matchHttpRoute, type Via } from './http-route.ts';
import { h1AsStream, h2Request, h2Response, h2UpstreamHeaders } from './h2.ts';

/**
 * One request through the gateway: Host and path -> an HTTPRoute or GRPCRoute rule (Gateway API),
 * else an Ingress rule (the tables of the moment) -> the endpoints of its Service -> the sidecar's
 * forwarder (retries, timeouts, x-outrigger-error), observed as a SERVER span and counted in
 * metrics. HTTP/1.1 requests, WebSocket upgrades, and HTTP/2 streams (h2c or h2 by ALPN).
 *
 * An HTTP/2 stream is routed exactly as an HTTP/1.1 request is (h2.ts); then a backend whose
 * Service port says appProtocol kubernetes.io/h2c (Gateway API's backend protocol) gets the stream
 * over h2c, balanced per stream, its trailers relayed (gRPC's status), as does every backend of a
 * GRPCRoute (gRPC is HTTP/2); any other backend gets it over HTTP/1.1, translated both ways. An
 * HTTP/1.1 request to an h2c backend goes the other way: as a stream, through the same HTTP/2
 * forwarder (h1AsStream).
 */
export interface HandlerOptions {
  table: () => RouteTable;
  /** The Gateway API table (empty without --gateway-api); tried before the Ingresses. */
  routes: () => GatewayRouteTable;
  /** In [0, 1): draws a backendRef by weight. */
  random: () => number;
  /**
   * The Gateway whose own address a pod port serves; undefined for the shared HTTP and HTTPS ports
   * (every Gateway's routes, then the Ingresses).
   */
  via?: (localPort: number | undefined) => Via | undefined;
  /** Whether the routing data (Ingresses, classes, Secrets) is served from last-known-good. */
  tableStale: () => boolean;
  backends: BackendPolicy;
  forwarder: Forwarder;
  /** Calls h2c backends (appProtocol kubernetes.io/h2c) for HTTP/2 clients; without it they get HTTP/1.1. */
  h2Forwarder?: H2Forwarder;
  observer: HopObserver;
  log: Logger;
  clock: Clock;
}

type Routed =
  /** grpcStatus: a gRPC call's status when not the code's own (a GRPCRoute's invalid backend). */
  | { kind: 'error'; code: ProxyErrorCode; detail: string; grpcStatus?: number }
  | { kind: 'redirect'; status: number; location: string }
  | (Extract<BackendDecision, { kind: 'plan' }> & {
      edit?: (req: IncomingMessage) => void;
      /** A GRPCRoute's backend: called over h2c whatever its Service port's appProtocol says. */
      grpcRoute?: boolean;
    });

/** Whether a routed request's backend is called over h2c: a GRPCRoute's always, else by appProtocol. */
const overH2c = (routed: Extract<Routed, { kind: 'plan' }>): boolean =>
  routed.grpcRoute === true || speaksH2c(routed.appProtocol);

export class IngressGatewayHandler implements GatewayHandler {
  readonly #o: HandlerOptions;
  readonly #problems: ThrottledLog;

  constructor(o: HandlerOptions) {
    this.#o = o;
    this.#problems = new ThrottledLog(o.log, o.clock);
  }

  readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const hop = startRequestHop(this.#o.observer, 'ingress', req, 'http');
    this.#handle(req, res, hop).catch((e: unknown) => {
      this.#o.log.error('gateway request failed unexpectedly', { error: errorMessage(e) });
      const status = sendError(res, 'upstream_failed', 'internal proxy error');
      hop.end({ status, errorCode: 'upstream_failed', errorMessage: errorMessage(e) });
    });
  };

  readonly onUpgrade = (req: IncomingMessage, socket: Socket, head: Buffer): void => {
    const hop = startRequestHop(this.#o.observer, 'ingress', req, 'http');
    socket.on('error', () => socket.destroy());
    this.#upgrade(req, socket, head, hop).catch((e: unknown) =>
      this.#socketFail(socket, hop, 'upstream_failed', errorMessage(e)),
    );
  };

  readonly onStream = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void => {
    stream.on('error', () => {});
    const grpc = isGrpc(headers);
    const req = h2Request(stream, headers);
    const rpc = grpc ? rpcOf(req.url ?? '') : undefined;
    const hop = startRequestHop(this.#o.observer, 'ingress', req, 'http', undefined, rpc);
    const timeout = streamDeadline(headers, grpc);
    if (timeout instanceof Error) return refuseStream(stream, grpc, hop, 'bad_request', timeout.message);
    this.#stream(stream, req, headers.te, grpc, timeout, hop).catch((e: unknown) => {
      this.#o.log.error('gateway stream failed unexpectedly', { error: errorMessage(e) });
      refuseStream(stream, grpc, hop, 'upstream_failed', 'internal proxy error');
    });
  };

  async #stream(
    stream: ServerHttp2Stream,
    req: IncomingMessage,
    te: unknown,
    grpc: boolean,
    timeout: number | undefined,
    hop: Hop,
  ): Promise<void> {
    const routed = await this.#route(req, hop);
    if (routed.kind === 'error')
      return refuseStream(stream, grpc, hop, routed.code, routed.detail, routed.grpcStatus);
    if (routed.kind === 'redirect') {
      if (!stream.closed)
        stream.respond({ ':status': routed.status, location: routed.location }, { endStream: true });
      return hop.end({ status: routed.status });
    }
    req.headers = this.#upstreamHeaders(req, false);
    routed.edit?.(req);
    if (this.#o.h2Forwarder && overH2c(routed))
      return this.#h2c(this.#o.h2Forwarder, stream, req, te, grpc, timeout, routed, hop);
    const result = await this.#o.forwarder.forward(req, h2Response(stream), routed, hop);
    if (result.errorCode) this.#warn(result.errorCode, result.errorMessage);
    hop.end(result);
  }

  /** A request to an h2c backend, as a stream (an HTTP/1.1 client's exchange stands for one). */
  async #h2c(
    h2: H2Forwarder,
    down: ServerHttp2Stream,
    req: IncomingMessage,
    te: unknown,
    grpc: boolean,
    timeout: number | undefined,
    plan: ForwardPlan,
    hop: Hop,
  ): Promise<void> {
    const call = {
      down,
      headers: h2UpstreamHeaders(req, te),
      grpc,
      ...(timeout === undefined ? {} : { timeoutMs: timeout }),
    };
    const result = await h2.forward(call, plan, hop);
    if (result.errorCode && result.status !== 0) this.#warn(result.errorCode, result.errorMessage);
    hop.end(result);
  }

  async #handle(req: IncomingMessage, res: ServerResponse, hop: Hop): Promise<void> {
    const routed = await this.#route(req, hop);
    if (routed.kind === 'error') {
      const status = sendError(res, routed.code, routed.detail);
      hop.end({ status, errorCode: routed.code, errorMessage: routed.detail });
      return;
    }
    if (routed.kind === 'redirect') {
      res.writeHead(routed.status, { location: routed.location, 'content-length': 0 });
      res.end();
      hop.end({ status: routed.status });
      return;
    }
    const te = req.headers.te;
    req.headers = this.#upstreamHeaders(req, false);
    routed.edit?.(req);
    if (this.#o.h2Forwarder && overH2c(routed)) {
      // The backend speaks HTTP/2: the exchange goes as a stream. A client waiting for 100
      // Continue is told to send at once (the stream takes the body as it comes).
      if (expectsContinue(req)) res.writeContinue();
      delete req.headers.expect;
      return this.#h2c(this.#o.h2Forwarder, h1AsStream(req, res), req, te, false, undefined, routed, hop);
    }
    const result = await this.#o.forwarder.forward(req, res, routed, hop);
    if (result.errorCode) this.#warn(result.errorCode, result.errorMessage);
    hop.end(result);
  }

  async #upgrade(req: IncomingMessage, socket: Socket, head: Buffer, hop: Hop): Promise<void> {
    const routed = await this.#route(req, hop);
    if (routed.kind === 'error') return this.#socketFail(socket, hop, routed.code, routed.detail);
    if (routed.kind === 'redirect') {
      socket.end(
        `HTTP/1.1 ${routed.status} Redirect\r\nlocation: ${routed.location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`,
      );
      hop.end({ status: routed.status });
      return;
    }
    req.headers = this.#upstreamHeaders(req, true);
    routed.edit?.(req);
    this.#o.forwarder.upgrade(req, socket, head, routed, hop, (code, detail) =>
      this.#socketFail(socket, hop, code, detail),
    );
  }

  async #route(req: IncomingMessage, hop: Hop): Promise<Routed> {
    const target = requestTarget(req);
    if (!target) return { kind: 'error', code: 'bad_request', detail: 'malformed request target' };
    const tableStale = this.#o.tableStale();
    if (tableStale) hop.setStale(true);
    const scheme = (req.socket as TLSSocket).encrypted ? 'https' : 'http';
    const host = normalizeHost(target.host);
    const via = this.#o.via?.(req.socket.localPort);
    const selected = matchHttpRoute(this.#o.routes(), scheme, host, target.path, req, via);
    if (selected) return this.#routeHttp(req, hop, selected, { scheme, host, path: target.path });
    // A Gateway's own address serves its routes only: no other Gateway's, no Ingress.
    if (via) {
      return {
        kind: 'error',
        code: 'no_route',
        detail: `no route of Gateway ${via.gateway} port ${via.port} matches ${target.host || '(no host)'}${target.path}`,
      };
    }
    const route = this.#o.table().lookup(target.host, target.path);
    if (!route) {
      return {
        kind: 'error',
        code: 'no_route',
        detail: `no Ingress rule matches ${target.host || '(no host)'}${target.path}`,
      };
    }
    const service = `${route.backend.namespace}/${route.backend.name}`;
    hop.setService(service);
    const decision = await planBackend(this.#o.backends, route.backend);
    if (decision.stale) hop.setStale(true);
    if (decision.kind === 'error') this.#warn(decision.code, decision.detail, service);
    return decision;
  }

  async #routeHttp(
    req: IncomingMessage,
    hop: Hop,
    selected: Selected,
    line: { scheme: 'http' | 'https'; host: string; path: string },
  ): Promise<Routed> {
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const action = httpRouteAction(selected, { ...line, search: q < 0 ? '' : url.slice(q) }, this.#o.random);
    if (action.kind === 'redirect') return action;
    const grpcRoute = selected.rule.kind === 'GRPCRoute';
    // The spec's answer to an invalid backendRef: HTTPRoute's is a 500, GRPCRoute's UNAVAILABLE.
    const invalid = (detail: string): Routed => ({
      kind: 'error',
      code: 'route_backend_invalid',
      detail,
      ...(grpcRoute ? { grpcStatus: GrpcStatus.UNAVAILABLE } : {}),
    });
    if (action.kind === 'invalid') return invalid(action.detail);
    const service = `${action.backend.namespace}/${action.backend.name}`;
    hop.setService(service);
    const decision = await planBackend(this.#o.backends, action.backend);
    if (decision.stale) hop.setStale(true);
    if (decision.kind === 'error') {
      this.#warn(decision.code, decision.detail, service);
      // A backendRef naming a Service that does not exist is an invalid one.
      return decision.absent ? invalid(decision.detail) : decision;
    }
    return {
      ...decision,
      grpcRoute,
      edit: (r) => action.editRequest(r),
      ...(action.editResponse ? { editResponse: action.editResponse } : {}),
      ...(action.timeouts?.requestMs ? { requestTimeoutMs: action.timeouts.requestMs } : {}),
      ...(action.timeouts?.backendRequestMs ? { attemptTimeoutMs: action.timeouts.backendRequestMs } : {}),
    };
  }

  /**
   * The gateway is the edge: X-Forwarded-For is appended, and X-Real-IP, X-Forwarded-Proto, -Host
   * and -Port are set from the connection, as ingress-nginx does by default. A client's Forwarded
   * is dropped rather than passed on as if the gateway vouched for it.
   */
  #upstreamHeaders(req: IncomingMessage, upgrade: boolean): IncomingMessage['headers'] {
    const h = upstreamRequestHeaders(req.headers, req.socket.remoteAddress, upgrade);
    delete h.forwarded;
    if (req.socket.remoteAddress) h['x-real-ip'] = req.socket.remoteAddress;
    else delete h['x-real-ip'];
    h['x-forwarded-port'] = String(req.socket.localPort ?? '');
    h['x-forwarded-proto'] = (req.socket as TLSSocket).encrypted ? 'https' : 'http';
    if (req.headers.host) h['x-forwarded-host'] = req.headers.host;
    return h as IncomingMessage['headers'];
  }

  #warn(code: string, cause: string | undefined, service = ''): void {
    this.#problems.warn(`${code}\u0000${service}`, 'gateway request failed', { code, service, cause });
  }

  #socketFail(socket: Socket, hop: Hop, code: ProxyErrorCode, detail: string): void {
    writeSocketError(socket, code, detail);
    hop.end({ status: statusOf[code], errorCode: code, errorMessage: detail });
  }
}

/**
 * Host and path of a request: origin-form takes the Host header; absolute-form its own authority
 * (RFC 9112 section 3.2.2, rewritten to origin-form for the backend). The path stops at the query.
 * undefined: not a target we can route.
 */
export function requestTarget(req: IncomingMessage): { host: string; path: string } | undefined {
  const t = toOriginForm(req);
  if ('error' in t) return undefined;
  if (t.absolute && t.absolute.protocol !== 'http:' && t.absolute.protocol !== 'https:') return undefined;
  const url = req.url ?? '';
  const q = url.indexOf('?');
  const n = normalisePath(q < 0 ? url : url.slice(0, q));
  if ('error' in n) return undefined;
  // The backend gets the path that was matched, not one it could resolve to another route.
  req.url = q < 0 ? n.path : n.path + url.slice(q);
  return { host: req.headers.host ?? '', path: n.path };
}
