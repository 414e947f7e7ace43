import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Clock, Random } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { ThrottledLog } from '../shared/log-throttle.ts';
import { splitHostPort } from '../routing/authority.ts';
import type { Destination as RouteDestination } from '../routing/router.ts';
import type { Destination, OriginalDestination } from './capture-port.ts';
import type { Dial } from './dial.ts';
import { decide, decideNow, type Decision, type EgressPolicy } from './egress-plan.ts';
import { applyRoutes, type Routed } from './egress-routes.ts';
import type { Forwarder } from './forward.ts';
import { toOriginForm, upstreamRequestHeaders } from './headers.ts';
import { hopToken, markHop, seenBefore } from './loop.ts';
import { endOnce, startRequestHop, type Hop, type HopObserver } from './observer.ts';
import { sendError, statusOf, writeSocketError, type ProxyErrorCode } from './status.ts';
import { h2PrefaceOrNot } from './sniff.ts';
import { openUpstream, splice } from './tunnel.ts';

/**
 * The egress listener's handlers: the app's outbound HTTP requests (origin-form under transparent
 * capture, absolute-form and CONNECT under explicit capture), WebSocket upgrades, and opaque TCP
 * streams that transparent capture hands over.
 */
export interface EgressOptions {
  policy: EgressPolicy;
  forwarder: Forwarder;
  observer: HopObserver;
  log: Logger;
  clock: Clock;
  /** For this listener's hop token (the loop marker). */
  random: Random;
  originalDestination?: OriginalDestination;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  /** How long a tunnel to an h2c port waits for its client's first bytes before it is opaque. */
  detectTimeoutMs?: number;
  /** Opens TCP streams to a Service's endpoints (mutual TLS to meshed ones); passthrough stays plain. */
  tcpDial?: Dial;
  /**
   * Takes over a CONNECT tunnel to a Service port that speaks h2c (appProtocol) whose client
   * opened with the h2c preface: its streams are then balanced one by one. Resolves when the
   * tunnel has closed.
   */
  h2Tunnel?: {
    accepts(appProtocol: string | undefined): boolean;
    adopt(socket: Socket, head: Buffer, dest: RouteDestination): Promise<void>;
  };
}

const ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';
/** As long as transparent capture waits for a silent client's first bytes. */
const DETECT_TIMEOUT_MS = 1_000;

type Plan = Extract<Decision, { kind: 'plan' }>;

type Target = { dest: RouteDestination; original?: Destination } | { error: string; code?: 'misdirected' };

export class EgressHandler {
  readonly #o: EgressOptions;
  readonly #problems: ThrottledLog;
  readonly #token: string;
  /** Explicit capture: the destination of each Host header seen, parsed once. */
  readonly #byHost = new Map<string, Target>();

  constructor(o: EgressOptions) {
    this.#o = o;
    this.#problems = new ThrottledLog(o.log, o.clock);
    this.#token = hopToken(o.random);
  }

  readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const hop = this.#startHop(req, 'http');
    this.#handle(req, res, hop).catch((e: unknown) => {
      this.#o.log.error('egress request failed unexpectedly', { error: errorMessage(e) });
      const status = sendError(res, 'upstream_failed', 'internal proxy error');
      hop.end({ status, errorCode: 'upstream_failed', errorMessage: errorMessage(e) });
    });
  };

  readonly onUpgrade = (req: IncomingMessage, socket: Socket, head: Buffer): void => {
    const hop = this.#startHop(req, 'http');
    socket.on('error', () => socket.destroy());
    this.#upgrade(req, socket, head, hop).catch((e: unknown) =>
      this.#socketFail(socket, hop, 'upstream_failed', errorMessage(e)),
    );
  };

  readonly onConnect = (req: IncomingMessage, socket: Socket, head: Buffer): void => {
    const hop = this.#startHop(req, 'tcp');
    socket.on('error', () => socket.destroy());
    this.#connect(req, socket, head, hop).catch((e: unknown) =>
      this.#socketFail(socket, hop, 'upstream_failed', errorMessage(e)),
    );
  };

  /** A non-HTTP stream from transparent capture, to be forwarded to its original destination. */
  onTcp(socket: Socket, original: Destination): void {
    const hop = endOnce(
      this.#o.observer.startHop({
        direction: 'egress',
        method: '',
        target: '',
        authority: `${original.address}:${original.port}`,
        headers: {},
        ...(socket.remoteAddress ? { peerAddress: socket.remoteAddress } : {}),
        protocol: 'tcp',
      }),
    );
    socket.on('error', () => socket.destroy());
    const dest = { host: original.address, port: original.port, defaultPort: original.port };
    this.#stream(socket, Buffer.alloc(0), dest, original, hop, false).catch((e: unknown) => {
      socket.destroy();
      hop.end({ status: 0, errorCode: 'upstream_failed', errorMessage: errorMessage(e) });
    });
  }

  #startHop(req: IncomingMessage, protocol: 'http' | 'tcp'): Hop {
    return startRequestHop(this.#o.observer, 'egress', req, protocol);
  }

  async #handle(req: IncomingMessage, res: ServerResponse, hop: Hop): Promise<void> {
    const routed = this.#route(req, hop);
    const decision = routed instanceof Promise ? await routed : routed;
    if (decision.kind === 'error') {
      const status = sendError(res, decision.code, decision.detail);
      hop.end({ status, errorCode: decision.code, errorMessage: decision.detail });
      return;
    }
    if (decision.kind === 'redirect') {
      res.writeHead(decision.status, { location: decision.location, 'content-length': 0 });
      res.end();
      hop.end({ status: decision.status });
      return;
    }
    req.headers = this.#upstreamHeaders(req, false);
    decision.edit?.(req);
    const result = await this.#o.forwarder.forward(req, res, decision, hop);
    if (result.errorCode)
      this.#problems.warn(`${result.errorCode}\u0000${decision.service ?? ''}`, 'egress request failed', {
        service: decision.service,
        code: result.errorCode,
        cause: result.errorMessage,
      });
    hop.end(result);
  }

  async #upgrade(req: IncomingMessage, socket: Socket, head: Buffer, hop: Hop): Promise<void> {
    const decision = await this.#route(req, hop);
    if (decision.kind === 'error') return this.#socketFail(socket, hop, decision.code, decision.detail);
    if (decision.kind === 'redirect') {
      socket.end(
        `HTTP/1.1 ${decision.status} Redirect\r\nlocation: ${decision.location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`,
      );
      return hop.end({ status: decision.status });
    }
    req.headers = this.#upstreamHeaders(req, true);
    decision.edit?.(req);
    this.#o.forwarder.upgrade(req, socket, head, decision, hop, (code, detail) =>
      this.#socketFail(socket, hop, code, detail),
    );
  }

  async #connect(req: IncomingMessage, socket: Socket, head: Buffer, hop: Hop): Promise<void> {
    const hp = splitHostPort(req.url ?? '');
    if (!hp || hp.port === undefined)
      return this.#socketFail(socket, hop, 'bad_request', 'CONNECT needs host:port');
    await this.#stream(
      socket,
      head,
      { host: hp.host, port: hp.port, defaultPort: hp.port },
      undefined,
      hop,
      true,
    );
  }

  async #stream(
    socket: Socket,
    head: Buffer,
    dest: RouteDestination,
    original: Destination | undefined,
    hop: Hop,
    http: boolean,
  ): Promise<void> {
    const decision = await decide(this.#o.policy, dest, original, socket.remoteAddress ?? '');
    this.#annotate(hop, decision);
    if (decision.kind === 'error') {
      this.#logRefusal(decision);
      if (http) return this.#socketFail(socket, hop, decision.code, decision.detail);
      socket.destroy();
      hop.end({ status: 0, errorCode: decision.code, errorMessage: decision.detail });
      return;
    }
    const h2 = this.#o.h2Tunnel;
    if (http && h2?.accepts(decision.appProtocol))
      return this.#h2OrOpaque(socket, head, dest, decision, hop, h2);
    const open = await this.#open(decision, hop);
    if ('code' in open) {
      if (http) return this.#socketFail(socket, hop, open.code, open.detail);
      socket.destroy();
      hop.end({ status: 0, errorCode: open.code, errorMessage: open.detail });
      return;
    }
    if (http) socket.write(ESTABLISHED);
    await this.#splice(socket, open.upstream, head);
    hop.end({ status: http ? 200 : 0 });
  }

  /**
   * A CONNECT tunnel to a port whose appProtocol says h2c. The appProtocol names what the port
   * serves, not what this client speaks (gRPC over TLS is common on `grpc` ports), so the client's
   * first bytes decide: the h2c preface is served here, each stream balanced on its own; anything
   * else is an opaque stream, as to any other port. The 200 has to go first (a client says nothing
   * before it), so a failed connect can then only close the tunnel.
   */
  async #h2OrOpaque(
    socket: Socket,
    head: Buffer,
    dest: RouteDestination,
    decision: Plan,
    hop: Hop,
    h2: NonNullable<EgressOptions['h2Tunnel']>,
  ): Promise<void> {
    socket.write(ESTABLISHED);
    const waitMs = this.#o.detectTimeoutMs ?? DETECT_TIMEOUT_MS;
    const first = await h2PrefaceOrNot(socket, head, this.#o.clock, waitMs);
    if (first.kind === 'h2') await h2.adopt(socket, first.head, dest);
    if (first.kind !== 'other') return hop.end({ status: 200 });
    const open = await this.#open(decision, hop);
    if ('code' in open) {
      socket.destroy();
      return hop.end({ status: 200, errorCode: open.code, errorMessage: open.detail });
    }
    await this.#splice(socket, open.upstream, first.head);
    hop.end({ status: 200 });
  }

  async #open(
    decision: Plan,
    hop: Hop,
  ): Promise<{ upstream: Socket } | { code: ProxyErrorCode; detail: string }> {
    const dial = decision.passthrough ? undefined : this.#o.tcpDial;
    const open = await openUpstream(decision, hop, this.#o.clock, this.#o.connectTimeoutMs, dial);
    if (open.ok) return { upstream: open.upstream };
    return { code: open.timedOut ? 'upstream_timeout' : 'upstream_failed', detail: open.detail };
  }

  #splice(socket: Socket, upstream: Socket, head: Buffer): Promise<void> {
    if (head.length > 0) upstream.write(head);
    return splice(socket, upstream, this.#o.idleTimeoutMs);
  }

  #upstreamHeaders(req: IncomingMessage, upgrade: boolean): IncomingMessage['headers'] {
    const headers = upstreamRequestHeaders(req.headers, req.socket.remoteAddress, upgrade);
    markHop(headers, this.#token);
    return headers as IncomingMessage['headers'];
  }

  /**
   * Destination of an HTTP request, then the decision; a malformed target is a bad_request
   * decision. Synchronous when discovery already knows the Service: no promise per request.
   */
  #route(req: IncomingMessage, hop: Hop): Routed | Promise<Routed> {
    if (seenBefore(req.headers, this.#token))
      return { kind: 'error', code: 'loop_detected', detail: 'this request already passed this sidecar' };
    const target = this.#target(req);
    if ('error' in target) return { kind: 'error', code: target.code ?? 'bad_request', detail: target.error };
    const client = req.socket.remoteAddress ?? '';
    const { policy } = this.#o;
    const now = decideNow(policy, target.dest, target.original, client);
    const r = now
      ? applyRoutes(policy, req, target.dest, now, client)
      : decide(policy, target.dest, target.original, client).then((d) =>
          applyRoutes(policy, req, target.dest, d, client),
        );
    return r instanceof Promise ? r.then((x) => this.#noted(hop, x)) : this.#noted(hop, r);
  }

  #noted(hop: Hop, decision: Routed): Routed {
    if (decision.kind === 'redirect') return decision;
    this.#annotate(hop, decision);
    if (decision.kind === 'error') this.#logRefusal(decision);
    return decision;
  }

  #target(req: IncomingMessage): Target {
    // RFC 9112 section 3.2.2: the absolute-form authority wins over Host.
    const t = toOriginForm(req);
    if ('error' in t) return t;
    const u = t.absolute;
    if (u) {
      if (u.protocol !== 'http:' && u.protocol !== 'ws:')
        return { error: `unsupported scheme ${u.protocol} (use CONNECT for TLS)` };
      const host = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
      return { dest: { host, ...(u.port ? { port: Number(u.port) } : {}), defaultPort: 80 } };
    }
    const od = this.#o.originalDestination;
    if (od) {
      // Transparent capture: never Host, which the client picks freely.
      const original = od(req.socket);
      if (!original) return { error: 'connection was not redirected to the sidecar', code: 'misdirected' };
      return { dest: { host: original.address, port: original.port, defaultPort: original.port }, original };
    }
    const host = req.headers.host ?? '';
    let target = this.#byHost.get(host);
    if (!target) {
      const hp = splitHostPort(host);
      target = hp
        ? { dest: { host: hp.host, ...(hp.port ? { port: hp.port } : {}), defaultPort: 80 } }
        : { error: 'missing or malformed Host header' };
      // Clients choose the Host: the memo is bounded, and starting over is cheap.
      if (this.#byHost.size >= 4_096) this.#byHost.clear();
      this.#byHost.set(host, target);
    }
    return target;
  }

  #annotate(hop: Hop, d: Decision): void {
    if (d.service) hop.setService(d.service);
    if (d.stale) hop.setStale(true);
  }

  #logRefusal(d: Extract<Decision, { kind: 'error' }>): void {
    this.#problems.warn(`${d.code}\u0000${d.service ?? ''}`, 'egress refused', {
      code: d.code,
      service: d.service,
      cause: d.detail,
    });
  }

  #socketFail(socket: Socket, hop: Hop, code: ProxyErrorCode, detail: string): void {
    writeSocketError(socket, code, detail);
    hop.end({ status: statusOf[code], errorCode: code, errorMessage: detail });
  }
}
