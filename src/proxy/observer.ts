/**
 * The narrow port through which tracing and metrics watch proxy hops. The proxy owns it; the
 * tracing engineer implements it in src/tracing/ and src/compose/ wires implementations together with
 * combineObservers(). The proxy calls it on every request, so implementations must be cheap and
 * must never throw (a collector that is down costs spans, never requests).
 */
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http';

export type Direction = 'ingress' | 'egress';

export interface HopStart {
  direction: Direction;
  method: string;
  /** Origin-form target (path and query) as the client sent it. */
  target: string;
  /** The authority the request was addressed to (Host, absolute-form or CONNECT target). */
  authority: string;
  /** Incoming request headers, for context extraction (W3C traceparent, B3, uber-trace-id). */
  headers: IncomingHttpHeaders;
  /** The downstream peer's address. */
  peerAddress?: string;
  /** 'http' for proxied requests, 'tcp' for opaque streams and CONNECT tunnels. */
  protocol: 'http' | 'tcp';
  /** A gRPC call (HTTP/2, application/grpc): its service and method from the path. */
  rpc?: { service: string; method: string };
  /** The caller's verified mesh identity (ingress over mutual TLS); absent for plaintext. */
  peer?: PeerIdentity | undefined;
}

/**
 * A meshed caller, resolved once per connection: its SPIFFE id (span attribute) and its bounded
 * metric label (`namespace/serviceaccount`, or `other` past the cap).
 */
export interface PeerIdentity {
  id: string;
  label: string;
}

export interface HopEnd {
  /** HTTP status sent downstream; 0 for TCP streams and for requests aborted before a status. */
  status: number;
  /** Stable OutriggerError code when the proxy itself failed the request (x-outrigger-error). */
  errorCode?: string;
  /** Free-text cause, for span events and debug logs; never includes secrets. */
  errorMessage?: string;
  /** A gRPC call's status: from the upstream's trailers, or the proxy's own answer. */
  grpcStatus?: number;
}

export interface Hop {
  /** The Service the hop was routed to ("ns/name"); absent for fallback and ingress hops. */
  setService(service: string): void;
  /** The endpoint picked for the current attempt (called again on each retry). */
  setEndpoint(address: string, port: number): void;
  /** An attempt failed and another is being made; reason is an error code or 'status:503'. */
  addRetry(reason: string): void;
  /** The route came from last-known-good (stale) discovery data. */
  setStale(stale: boolean): void;
  /** Adds propagation headers to the upstream request; called once per attempt. */
  inject(headers: OutgoingHttpHeaders): void;
  /** Exactly once per hop. */
  end(result: HopEnd): void;
}

export interface HopObserver {
  startHop(info: HopStart): Hop;
}

const noopHop: Hop = {
  setService: () => {},
  setEndpoint: () => {},
  addRetry: () => {},
  setStale: () => {},
  inject: () => {},
  end: () => {},
};

export const noopObserver: HopObserver = { startHop: () => noopHop };

/**
 * Fans each hop out to several observers; one that throws is isolated from the request. A class,
 * not closures: this runs for every request, and one object per hop is all it allocates.
 */
export function combineObservers(...observers: HopObserver[]): HopObserver {
  if (observers.length === 0) return noopObserver;
  if (observers.length === 1 && observers[0]) return observers[0];
  return {
    startHop(info) {
      const hops: Hop[] = [];
      for (const o of observers) {
        try {
          hops.push(o.startHop(info));
        } catch {
          hops.push(noopHop);
        }
      }
      return new CombinedHop(hops);
    },
  };
}

class CombinedHop implements Hop {
  readonly #hops: Hop[];

  constructor(hops: Hop[]) {
    this.#hops = hops;
  }

  // Loops with their own try, not a shared helper taking a closure: these run several times per
  // request, and a closure per call is garbage per call.
  setService(service: string): void {
    for (const h of this.#hops)
      try {
        h.setService(service);
      } catch {
        // an observer's failure costs its own record, never the request
      }
  }

  setEndpoint(address: string, port: number): void {
    for (const h of this.#hops)
      try {
        h.setEndpoint(address, port);
      } catch {
        // as above
      }
  }

  addRetry(reason: string): void {
    for (const h of this.#hops)
      try {
        h.addRetry(reason);
      } catch {
        // as above
      }
  }

  setStale(stale: boolean): void {
    for (const h of this.#hops)
      try {
        h.setStale(stale);
      } catch {
        // as above
      }
  }

  inject(headers: OutgoingHttpHeaders): void {
    for (const h of this.#hops)
      try {
        h.inject(headers);
      } catch {
        // as above
      }
  }

  end(result: HopEnd): void {
    for (const h of this.#hops)
      try {
        h.end(result);
      } catch {
        // as above
      }
  }
}

/** Makes end() idempotent, for paths where an error and a close can both try to finish a hop. */
export function endOnce(hop: Hop): Hop {
  return new OnceHop(hop);
}

class OnceHop implements Hop {
  readonly #hop: Hop;
  #ended = false;

  constructor(hop: Hop) {
    this.#hop = hop;
  }

  setService(service: string): void {
    this.#hop.setService(service);
  }

  setEndpoint(address: string, port: number): void {
    this.#hop.setEndpoint(address, port);
  }

  addRetry(reason: string): void {
    this.#hop.addRetry(reason);
  }

  setStale(stale: boolean): void {
    this.#hop.setStale(stale);
  }

  inject(headers: OutgoingHttpHeaders): void {
    this.#hop.inject(headers);
  }

  end(result: HopEnd): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#hop.end(result);
  }
}

/** A hop for an HTTP request (or an upgrade or CONNECT on it, or a gRPC call), with end() made idempotent. */
export function startRequestHop(
  observer: HopObserver,
  direction: Direction,
  req: IncomingMessage,
  protocol: 'http' | 'tcp',
  peer?: PeerIdentity,
  rpc?: HopStart['rpc'],
): Hop {
  return endOnce(
    observer.startHop({
      direction,
      method: req.method ?? '',
      target: req.url ?? '',
      authority: req.headers.host ?? '',
      headers: req.headers,
      peerAddress: req.socket.remoteAddress,
      protocol,
      peer,
      ...(rpc ? { rpc } : {}),
    }),
  );
}
