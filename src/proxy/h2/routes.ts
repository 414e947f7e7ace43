import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { splitHostPort } from '../../routing/authority.ts';
import type { Destination as RouteDestination } from '../../routing/router.ts';
import type { Destination, OriginalDestination } from '../capture-port.ts';
import type { Headers } from '../../routes/filters.ts';
import { decide, decideNow, type Decision, type EgressPolicy } from '../egress-plan.ts';
import { applyRoutes, type CallView, type Routed } from '../egress-routes.ts';
import { CLIENT_CERT_HEADER, type IngressHandler } from '../ingress.ts';
import { HOP_HEADER, markHop, seenBefore } from '../loop.ts';
import type { H2Route, H2StreamContext } from './handler.ts';

/**
 * Where an HTTP/2 stream goes, per listener. Egress: the cluster Service named by :authority (or,
 * under transparent capture, the connection's original destination), balanced by the same plan as
 * HTTP/1. Ingress: the app.
 */
/** appProtocol values that mean prior-knowledge h2c (KEP-3726's name, and gRPC as Istio reads it). */
const H2C_PROTOCOLS: ReadonlySet<string> = new Set(['kubernetes.io/h2c', 'grpc', 'h2c']);

export const speaksH2c = (appProtocol: string | undefined): boolean =>
  appProtocol !== undefined && H2C_PROTOCOLS.has(appProtocol.toLowerCase());

/** The CONNECT target of a tunnel whose h2c streams are served here (explicit capture). */
const tunnelTargets = new WeakMap<Socket, RouteDestination>();

export function markTunnel(socket: Socket, dest: RouteDestination): void {
  tunnelTargets.set(socket, dest);
}

export interface EgressH2RouteOptions {
  policy: EgressPolicy;
  /** This listener's loop marker (each listener has its own). */
  token: string;
  originalDestination?: OriginalDestination;
}

export function egressH2Route(o: EgressH2RouteOptions): (ctx: H2StreamContext) => H2Route | Promise<H2Route> {
  const mark = (h: OutgoingHttpHeaders): void => markHop(h, o.token);
  const planned = (d: Routed): H2Route =>
    d.kind !== 'plan'
      ? d
      : {
          kind: 'plan',
          plan: d,
          ...(d.service ? { service: d.service } : {}),
          stale: d.stale,
          headers: d.edit ? routeEdit(mark, d.edit) : mark,
        };
  return ({ headers, socket }) => {
    if (seenBefore(headers, o.token))
      return { kind: 'error', code: 'loop_detected', detail: 'this request already passed this sidecar' };
    let dest: RouteDestination;
    let original: Destination | undefined;
    const tunnel = tunnelTargets.get(socket);
    if (tunnel) {
      // Inside CONNECT the tunnel's target is the destination, as for the bytes of any tunnel.
      dest = tunnel;
    } else if (o.originalDestination) {
      // Transparent capture: never :authority, which the client picks freely.
      original = o.originalDestination(socket);
      if (!original)
        return { kind: 'error', code: 'misdirected', detail: 'connection was not redirected to the sidecar' };
      dest = { host: original.address, port: original.port, defaultPort: original.port };
    } else {
      const hp = splitHostPort(String(headers[':authority'] ?? headers.host ?? ''));
      if (!hp) return { kind: 'error', code: 'bad_request', detail: 'missing or malformed :authority' };
      dest = { host: hp.host, ...(hp.port ? { port: hp.port } : {}), defaultPort: 80 };
    }
    const client = socket.remoteAddress ?? '';
    const now = decideNow(o.policy, dest, original, client);
    return now
      ? routed(o.policy, headers, dest, now, client, planned)
      : decide(o.policy, dest, original, client).then((d) =>
          routed(o.policy, headers, dest, d, client, planned),
        );
  };
}

/** A stream's decision once the routes attached to its Service (if any) have had their say. */
function routed(
  policy: EgressPolicy,
  headers: IncomingHttpHeaders,
  dest: RouteDestination,
  d: Decision,
  client: string,
  planned: (r: Routed) => H2Route,
): H2Route | Promise<H2Route> {
  if (!policy.routes) return planned(d);
  const r = applyRoutes(policy, streamCall(headers), dest, d, client);
  return r instanceof Promise ? r.then(planned) : planned(r);
}

/** An h2 stream as routes read a call: :method, :path, and :authority as its Host. */
function streamCall(headers: IncomingHttpHeaders): CallView {
  return {
    method: String(headers[':method'] ?? 'GET'),
    url: String(headers[':path'] ?? '/'),
    headers: { ...headers, host: headers[':authority'] ?? headers.host },
  };
}

/** A route's request edit on an h2 stream's upstream headers: :path, and a rewritten host as :authority. */
function routeEdit(
  mark: (h: OutgoingHttpHeaders) => void,
  edit: NonNullable<Extract<Routed, { kind: 'plan' }>['edit']>,
): (h: OutgoingHttpHeaders) => void {
  return (h) => {
    mark(h);
    const call = { url: String(h[':path'] ?? '/'), headers: h as Headers };
    edit(call);
    h[':path'] = call.url;
    if (h.host !== undefined) {
      h[':authority'] = h.host;
      delete h.host;
    }
  };
}

/**
 * What the ingress applies to a stream besides the app's address: a plaintext caller refused
 * (mTLS strict or allow-from), and the caller's verified identity (mesh listener), as on HTTP/1.
 */
export interface IngressH2Options {
  refuse?: (socket: Socket) => string | undefined;
  callerIdentity?: (socket: Socket) => string | undefined;
}

export function ingressH2Route(
  ingress: IngressHandler,
  o: IngressH2Options = {},
): (ctx: H2StreamContext) => H2Route {
  return ({ socket }) => {
    const refused = o.refuse?.(socket);
    if (refused) return { kind: 'error', code: 'mesh_caller_denied', detail: refused };
    const plan = ingress.plan(socket);
    if ('error' in plan) return { kind: 'error', code: plan.code, detail: plan.error };
    const caller = o.callerIdentity?.(socket);
    return {
      kind: 'plan',
      plan,
      headers: (h) => {
        // The loop marker ends at the app, as on HTTP/1; only the sidecar vouches for a caller.
        delete h[HOP_HEADER];
        delete h[CLIENT_CERT_HEADER];
        if (caller) h[CLIENT_CERT_HEADER] = caller;
      },
    };
  };
}
