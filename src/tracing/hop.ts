/**
 * The hop-observer port as tracing sees it. The proxy owns the real port (src/proxy/observer.ts);
 * tracing may not import proxy/ (docs/design.md, import directions), so these types mirror it structurally and
 * src/compose/ passes a tracing observer wherever the proxy expects its HopObserver. Keep in step with
 * the proxy's file: a drift is a type error in src/compose/, not a silent mismatch.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

export interface HopStart {
  direction: 'ingress' | 'egress';
  method: string;
  target: string;
  authority: string;
  headers: IncomingHttpHeaders;
  peerAddress?: string;
  protocol: 'http' | 'tcp';
  rpc?: { service: string; method: string };
  peer?: { id: string; label: string } | undefined;
}

export interface HopEnd {
  status: number;
  errorCode?: string;
  errorMessage?: string;
  grpcStatus?: number;
}

export interface Hop {
  setService(service: string): void;
  setEndpoint(address: string, port: number): void;
  addRetry(reason: string): void;
  setStale(stale: boolean): void;
  inject(headers: OutgoingHttpHeaders): void;
  end(result: HopEnd): void;
}

export interface HopObserver {
  startHop(info: HopStart): Hop;
}

export const noopHop: Hop = {
  setService: () => {},
  setEndpoint: () => {},
  addRetry: () => {},
  setStale: () => {},
  inject: () => {},
  end: () => {},
};
