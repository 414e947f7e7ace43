import type { Clock } from '../shared/clock.ts';
import type { Hop, HopEnd, HopObserver } from './observer.ts';

/** What the proxy reports to metrics; the admin module's Metrics implements it. */
export interface ProxyMetricsSink {
  request(
    direction: string,
    service: string,
    caller: string,
    status: number,
    error: string,
    seconds: number,
  ): void;
  retry(direction: string, service: string, reason: string): void;
  /** A gRPC call ended with this status. */
  grpcCall(direction: string, service: string, grpcStatus: number): void;
}

/** The caller label of an ingress request that came without a verified identity (plaintext). */
export const UNAUTHENTICATED = 'unauthenticated';

/**
 * A HopObserver that counts every hop (requests by direction/service/caller/status, latency,
 * retries, gRPC status). The caller label is known only on ingress; egress hops carry "".
 */
export function metricsObserver(sink: ProxyMetricsSink, clock: Clock): HopObserver {
  return {
    startHop: (info) =>
      new MetricsHop(
        sink,
        clock,
        info.direction,
        info.peer?.label ?? (info.direction === 'ingress' ? UNAUTHENTICATED : ''),
      ),
  };
}

class MetricsHop implements Hop {
  readonly #sink: ProxyMetricsSink;
  readonly #clock: Clock;
  readonly #direction: string;
  readonly #caller: string;
  readonly #started: number;
  #service = '';

  constructor(sink: ProxyMetricsSink, clock: Clock, direction: string, caller: string) {
    this.#sink = sink;
    this.#clock = clock;
    this.#direction = direction;
    this.#caller = caller;
    this.#started = clock.now();
  }

  setService(service: string): void {
    this.#service = service;
  }

  setEndpoint(): void {}
  setStale(): void {}
  inject(): void {}

  addRetry(reason: string): void {
    this.#sink.retry(this.#direction, this.#service, reason);
  }

  end(r: HopEnd): void {
    const seconds = (this.#clock.now() - this.#started) / 1000;
    this.#sink.request(this.#direction, this.#service, this.#caller, r.status, r.errorCode ?? '', seconds);
    if (r.grpcStatus !== undefined) this.#sink.grpcCall(this.#direction, this.#service, r.grpcStatus);
  }
}
