import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Clock } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { ThrottledLog } from '../shared/log-throttle.ts';
import type { Destination, OriginalDestination } from './capture-port.ts';
import type { ForwardPlan, Forwarder, Upstream } from './forward.ts';
import { toOriginForm, upstreamRequestHeaders } from './headers.ts';
import { HOP_HEADER, ipLiteral, isSelfAddress } from './loop.ts';
import { endOnce, startRequestHop, type Hop, type HopObserver, type PeerIdentity } from './observer.ts';
import { sendError, statusOf, writeSocketError, type ProxyErrorCode } from './status.ts';
import { firstWords, type Reclaim } from './sniff.ts';
import { openUpstream, splice } from './tunnel.ts';

/**
 * The ingress listener's handlers: requests from other pods go to the app, at their original
 * destination under transparent capture, else on localhost at the first --app-port.
 */
export interface IngressOptions {
  forwarder: Forwarder;
  observer: HopObserver;
  log: Logger;
  clock: Clock;
  appPorts: readonly number[];
  appHost: string;
  ownPorts: ReadonlySet<number>;
  /** Transparent capture: the original destination of an accepted connection. */
  originalDestination?: OriginalDestination;
  /** Transparent capture: whether an address is this pod's (see pod-addresses.ts). */
  isPodAddress?: (address: string) => boolean;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  /**
   * The verified identity of the caller on this connection (the mesh listener's mutual TLS), sent
   * to the app as x-forwarded-client-cert. Whatever the caller sent in that header is dropped
   * first, on every ingress: only the sidecar may vouch for a caller.
   */
  callerIdentity?: (socket: Socket) => string | undefined;
  /** The same caller for spans and metric labels, resolved once per connection. */
  peer?: (socket: Socket) => PeerIdentity | undefined;
  /** Why a plaintext caller is refused (mTLS strict, or an allow-from it cannot satisfy); 403. */
  refuse?: (socket: Socket) => string | undefined;
}

export const CLIENT_CERT_HEADER = 'x-forwarded-client-cert';

type AppPlan = ForwardPlan | { error: string; code: ProxyErrorCode };

export class IngressHandler {
  readonly #o: IngressOptions;
  readonly #problems: ThrottledLog;
  /** Plans by app address and port; only this pod's own addresses get here. */
  readonly #plans = new Map<string, Map<number, AppPlan>>();

  constructor(o: IngressOptions) {
    this.#o = o;
    this.#problems = new ThrottledLog(o.log, o.clock);
  }

  readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const hop = this.#startHop(req, 'http');
    const target = toOriginForm(req);
    const plan =
      'error' in target ? { error: target.error, code: 'bad_request' as const } : this.plan(req.socket);
    const refused = this.#o.refuse?.(req.socket);
    if (refused) {
      const status = sendError(res, 'mesh_caller_denied', refused);
      hop.end({ status, errorCode: 'mesh_caller_denied', errorMessage: refused });
      return;
    }
    if ('error' in plan) {
      const status = sendError(res, plan.code, plan.error);
      hop.end({ status, errorCode: plan.code, errorMessage: plan.error });
      return;
    }
    req.headers = appHeaders(req, false);
    this.#vouch(req);
    this.#o.forwarder
      .forward(req, res, plan, hop)
      .then((r) => {
        if (r.errorCode)
          this.#problems.warn(r.errorCode, 'ingress request failed', {
            code: r.errorCode,
            cause: r.errorMessage,
          });
        hop.end(r);
      })
      .catch((e: unknown) => {
        const status = sendError(res, 'upstream_failed', 'internal proxy error');
        hop.end({ status, errorCode: 'upstream_failed', errorMessage: errorMessage(e) });
      });
  };

  readonly onUpgrade = (req: IncomingMessage, socket: Socket, head: Buffer): void => {
    const hop = this.#startHop(req, 'http');
    socket.on('error', () => socket.destroy());
    const target = toOriginForm(req);
    if ('error' in target) return this.#socketFail(socket, hop, 'bad_request', target.error);
    const plan = this.plan(req.socket);
    const refused = this.#o.refuse?.(req.socket);
    if (refused) return this.#socketFail(socket, hop, 'mesh_caller_denied', refused);
    if ('error' in plan) return this.#socketFail(socket, hop, plan.code, plan.error);
    const up = plan.next(new Set()) as Upstream;
    hop.setEndpoint(up.host, up.port);
    req.headers = appHeaders(req, true);
    this.#vouch(req);
    this.#o.forwarder.proxy.ws(
      req,
      socket,
      head,
      { target: { host: up.host, port: up.port } as unknown as string },
      (err: Error) =>
        this.#socketFail(socket, hop, 'upstream_failed', `upgrade to the app failed: ${errorMessage(err)}`),
    );
    socket.once('close', () => hop.end({ status: 101 }));
  };

  /**
   * A non-HTTP stream for the app (transparent capture, or a TCP stream on the mesh port).
   * reclaim: the client has said nothing yet, and gets its stream taken back if it starts with HTTP.
   */
  onTcp(socket: Socket, reclaim?: Reclaim): void {
    const hop = endOnce(
      this.#o.observer.startHop({
        direction: 'ingress',
        method: '',
        target: '',
        authority: '',
        headers: {},
        ...(socket.remoteAddress ? { peerAddress: socket.remoteAddress } : {}),
        protocol: 'tcp',
        ...(this.#o.peer ? { peer: this.#o.peer(socket) } : {}),
      }),
    );
    socket.on('error', () => socket.destroy());
    const plan = this.plan(socket);
    const refused = this.#o.refuse?.(socket);
    if (refused) {
      socket.destroy();
      hop.end({ status: 0, errorCode: 'mesh_caller_denied', errorMessage: refused });
      return;
    }
    if ('error' in plan) {
      socket.destroy();
      hop.end({ status: 0, errorCode: plan.code, errorMessage: plan.error });
      return;
    }
    void openUpstream(plan, hop, this.#o.clock, this.#o.connectTimeoutMs).then(async (open) => {
      if (!open.ok) {
        socket.destroy();
        hop.end({ status: 0, errorCode: 'upstream_failed', errorMessage: open.detail });
        return;
      }
      if (reclaim) {
        const first = await firstWords(socket, open.upstream, this.#o.idleTimeoutMs, this.#o.clock);
        if (first.kind !== 'tcp') {
          open.upstream.destroy();
          if (first.kind === 'http') reclaim(first.head);
          hop.end({ status: 0 });
          return;
        }
        if (first.head.length > 0) open.upstream.write(first.head);
      }
      await splice(socket, open.upstream, this.#o.idleTimeoutMs);
      hop.end({ status: 0 });
    });
  }

  #vouch(req: IncomingMessage): void {
    const id = this.#o.callerIdentity?.(req.socket);
    if (id) req.headers[CLIENT_CERT_HEADER] = id;
  }

  #startHop(req: IncomingMessage, protocol: 'http' | 'tcp'): Hop {
    return startRequestHop(this.#o.observer, 'ingress', req, protocol, this.#o.peer?.(req.socket));
  }

  /**
   * Under transparent capture, the original destination as it is (the pod IP and port): an app
   * bound to 127.0.0.1 only stays unreachable from other pods, as without a mesh (Istio since 1.10;
   * Linkerd forwards to the original destination too). The proxy's UID is exempt from the OUTPUT
   * redirect, so this connection is not captured again. A connection that was not redirected, or
   * whose destination is not one of this pod's addresses (loopback never is), is refused: falling
   * back to a local app port would let anyone who reaches the ingress port reach an app port
   * bound to loopback (Istio's inbound blackhole; Linkerd's inbound IPs check).
   * Explicit capture: the app on localhost at the first --app-port.
   */
  #appAddress(socket: Socket): Destination | { error: string; code: ProxyErrorCode } {
    const od = this.#o.originalDestination;
    if (od) {
      const original = od(socket);
      if (!original) return { error: 'connection was not redirected to the sidecar', code: 'misdirected' };
      if (!this.#o.isPodAddress?.(original.address))
        return { error: `destination ${original.address} is not this pod's address`, code: 'misdirected' };
      return original;
    }
    const port = this.#o.appPorts[0];
    if (port === undefined)
      return { error: 'no app port is configured for ingress', code: 'upstream_failed' };
    return { address: this.#o.appHost, port };
  }

  /** Where a connection's requests go: the app (also used for HTTP/2 streams). */
  plan(socket: Socket): ForwardPlan | { error: string; code: ProxyErrorCode } {
    const app = this.#appAddress(socket);
    if ('error' in app) return app;
    // One plan per app address: a pod has few, and the plan holds no per-request state.
    let byPort = this.#plans.get(app.address);
    if (!byPort) this.#plans.set(app.address, (byPort = new Map<number, AppPlan>()));
    let plan = byPort.get(app.port);
    if (!plan) byPort.set(app.port, (plan = this.#appPlan(app)));
    return plan;
  }

  #appPlan(app: Destination): AppPlan {
    if (this.#o.ownPorts.has(app.port) && isSelfAddress(ipLiteral(app.address) ?? app.address))
      return {
        error: `refusing to deliver to the sidecar's own listener ${app.port}`,
        code: 'loop_detected',
      };
    const up: Upstream = { id: `${app.address}:${app.port}`, host: app.address, port: app.port };
    const done = (): void => {};
    return {
      next: (tried) => (tried.has(up.id) ? undefined : up),
      canTry: (tried) => !tried.has(up.id),
      start: () => done,
      retryStatuses: new Set(),
      maxAttempts: 1,
    };
  }

  #socketFail(socket: Socket, hop: Hop, code: ProxyErrorCode, detail: string): void {
    writeSocketError(socket, code, detail);
    hop.end({ status: statusOf[code], errorCode: code, errorMessage: detail });
  }
}

/**
 * Request headers for the app. The loop marker ends here: the app is the end of a hop, and one
 * that copies incoming headers onto its own calls must not look like a loop.
 */
function appHeaders(req: IncomingMessage, upgrade: boolean): IncomingMessage['headers'] {
  return upstreamRequestHeaders(
    req.headers,
    req.socket.remoteAddress,
    upgrade,
    APP_DROPS,
  ) as IncomingMessage['headers'];
}

/**
 * Never passed to the app: the loop marker, and the caller identity header, which only this
 * sidecar may set (#vouch).
 */
const APP_DROPS: ReadonlySet<string> = new Set([HOP_HEADER, CLIENT_CERT_HEADER]);
