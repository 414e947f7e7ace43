import { createServer as createHttpServer, type Server } from 'node:http';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import type { AllowRule } from '../../../src/config/parse.ts';
import type { MeshTls } from '../../../src/mesh/mesh-tls.ts';
import type { ServerLimits } from '../../../src/proxy/server.ts';
import { meshWiring, type MeshWiring } from '../../../src/mesh/wiring.ts';
import { systemClock } from '../../../src/shared/clock.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { startProxy } from '../proxy/harness.ts';

/** Sidecars with mutual TLS on loopback addresses (one per "pod"), their apps, and a wire tap. */
export const log = createLogger({ write: () => {} });
export const TD = 'cluster.local';
export const WEB = 'spiffe://cluster.local/ns/shop/sa/web';
export const API = 'spiffe://cluster.local/ns/shop/sa/api';

type After = { after(fn: () => unknown): void };

export async function listen(
  server: Server | ReturnType<typeof createServer>,
  host: string,
): Promise<number> {
  await new Promise<void>((r) => server.listen(0, host, r));
  return (server.address() as AddressInfo).port;
}

/** An app that answers with the headers it got. */
export async function app(host: string, t: After): Promise<number> {
  const server = createHttpServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ xfcc: req.headers['x-forwarded-client-cert'] ?? null }));
  });
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return listen(server, host);
}

/** A TCP relay that records every byte the client sends: what a packet capture would see. */
export async function recordingRelay(host: string, to: number, t: After) {
  const seen: Buffer[] = [];
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    const upstream = connect(to, host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => s.destroy());
    }
    client.on('data', (d: Buffer) => seen.push(d));
    client.pipe(upstream).pipe(client);
  });
  t.after(() => {
    for (const s of sockets) s.destroy();
    relay.close();
  });
  const port = await listen(relay, host);
  return Object.assign(() => Buffer.concat(seen), { port });
}

export async function meshedSidecar(
  t: After,
  o: {
    host: string;
    /** The port peers' mesh listeners are dialled on (default: none is dialled). */
    peerPort?: number;
    /** This sidecar's mesh listener port (default 0: the system picks; see `meshPort`). */
    listenPort?: number;
    tls: MeshTls;
    allowFrom?: () => AllowRule[];
    appPorts?: number[];
    mode?: 'permissive' | 'strict';
    /** Adjusts the wiring (a loopback test cannot come from another pod's address). */
    wrap?: (w: MeshWiring) => MeshWiring;
    /** The listeners' limits (the mesh listener's handshake timeout is headersTimeoutMs). */
    limits?: Partial<ServerLimits>;
  },
) {
  const built = meshWiring({
    tls: o.tls,
    meshPort: o.peerPort ?? 1,
    listenPort: o.listenPort ?? 0,
    host: o.host,
    appHost: o.host,
    allowFrom: o.allowFrom ?? (() => []),
    mode: o.mode ?? 'permissive',
    connectTimeoutMs: 1_000,
    clock: systemClock,
    log,
  });
  const wiring = o.wrap ? o.wrap(built) : built;
  const p = await startProxy(
    { appPorts: o.appPorts ?? [] },
    {
      hosts: { egress: o.host, ingress: o.host, admin: o.host, app: o.host },
      mesh: wiring,
      ...(o.limits ? { limits: o.limits } : {}),
    },
  );
  t.after(() => p.close());
  return { ...p, wiring, meshPort: p.mesh ?? 0 };
}
