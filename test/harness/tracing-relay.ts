// A minimal HTTP relay that drives a HopObserver exactly as the proxy does (start, endpoint, stale,
// inject, end). It lets tracing tests and benchmarks exercise the tracing module end to end
// without the full sidecar; tests of the real sidecar use `outrigger proxy` instead.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { HopObserver } from '../../src/tracing/hop.ts';

export interface Relay {
  port: number;
  close(): Promise<void>;
}

export interface RelayOptions {
  observer: HopObserver;
  direction: 'ingress' | 'egress';
  upstreamPort: number;
  stale?: boolean;
  agent?: http.Agent;
}

export async function startRelay(opts: RelayOptions): Promise<Relay> {
  const agent = opts.agent ?? new http.Agent({ keepAlive: true, maxSockets: 256 });
  const server = http.createServer((req, res) => {
    const hop = opts.observer.startHop({
      direction: opts.direction,
      method: req.method ?? 'GET',
      target: req.url ?? '/',
      authority: req.headers.host ?? '',
      headers: req.headers,
      peerAddress: req.socket.remoteAddress,
      protocol: 'http',
    });
    hop.setService('default/backend');
    hop.setEndpoint('127.0.0.1', opts.upstreamPort);
    hop.setStale(opts.stale ?? false);
    const headers: http.OutgoingHttpHeaders = { ...req.headers };
    delete headers.connection;
    hop.inject(headers);
    const up = http.request(
      { host: '127.0.0.1', port: opts.upstreamPort, method: req.method, path: req.url, headers, agent },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
        upRes.once('end', () => hop.end({ status: upRes.statusCode ?? 0 }));
      },
    );
    up.once('error', (e) => {
      if (!res.headersSent) res.writeHead(502).end();
      hop.end({ status: 502, errorCode: 'upstream_failed', errorMessage: e.message });
    });
    req.pipe(up);
  });
  const relay = await listen(server);
  return {
    port: relay.port,
    close: async () => {
      await relay.close();
      if (!opts.agent) agent.destroy();
    },
  };
}

async function listen(server: http.Server): Promise<Relay> {
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A Service with one loopback endpoint, as file-source YAML (no API server: loopback is fine). */
export function serviceYaml(name: string, namespace: string, port: number, clusterIP: string): string {
  return `apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: ${namespace} }
spec:
  type: ClusterIP
  clusterIP: ${clusterIP}
  ports: [{ name: http, port: 80, targetPort: http, protocol: TCP }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ${name}-1
  namespace: ${namespace}
  labels: { kubernetes.io/service-name: ${name} }
addressType: IPv4
ports: [{ name: http, port: ${port}, protocol: TCP }]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: { ready: true, serving: true, terminating: false }
`;
}

/** A backend that answers 200 with the trace headers it received, as JSON. */
export async function startEchoBackend(): Promise<Relay> {
  const server = http.createServer((req, res) => {
    const seen = Object.fromEntries(
      Object.entries(req.headers).filter(([k]) =>
        /^(traceparent|tracestate|b3|x-b3-.*|uber-trace-id)$/.test(k),
      ),
    );
    const body = JSON.stringify(seen);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  return listen(server);
}
