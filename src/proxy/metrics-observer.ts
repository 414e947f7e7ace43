import type { Clock } from '../shared/clock.ts';
import type { HopObserver } from './observer.ts';

/** What the proxy reports to metrics; the admin module's Metrics implements it. */
export interface ProxyMetricsSink {
  request(direction: string, service: string, status: number, error: string, seconds: number): void;
  retry(direction: string, service: string, reason: string): void;
  /** A gRPC call ended with this status. */
  grpcCall(direction: string, service: string, grpcStatus: number): void;
}

/** A HopObserver that counts every hop (requests by direction/service/status, latency, retries, gRPC status). */
export function metricsObserver(sink: ProxyMetricsSink, clock: Clock): HopObserver {
  return {
    startHop(info) {
      const started = clock.now();
      let service = '';
      return {
        setService: (s) => void (service = s),
        setEndpoint: () => {},
        addRetry: (reason) => sink.retry(info.direction, service, reason),
        setStale: () => {},
        inject: () => {},
        end: (r) => {
          sink.request(info.direction, service, r.status, r.errorCode ?? '', (clock.now() - started) / 1000);
          if (r.grpcStatus !== undefined) sink.grpcCall(info.direction, service, r.grpcStatus);
        },
      };
    },
  };
}
