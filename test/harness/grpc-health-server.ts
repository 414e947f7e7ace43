// A gRPC server with only the standard health service (grpc.health.v1.Health/Check), on node:http2
// h2c, messages through protobufjs (so the sidecar's hand-made encoding is checked against a real
// protobuf implementation). As grpc-go's health server: a known service answers its status, an
// unknown one gets grpc-status 5 (NOT_FOUND); a service set to 'hang' is never answered.
// usage as a script: node grpc-health-server.ts ADDRESS:PORT SERVICE=STATUS... ('' names the server)
import { createServer, type Http2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import protobuf from 'protobufjs';

const root = protobuf.Root.fromJSON({
  nested: {
    HealthCheckRequest: { fields: { service: { type: 'string', id: 1 } } },
    HealthCheckResponse: { fields: { status: { type: 'ServingStatus', id: 1 } } },
    ServingStatus: { values: { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } },
  },
});
const Request = root.lookupType('HealthCheckRequest');
const Response = root.lookupType('HealthCheckResponse');

export type HealthStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN' | 'hang';

export interface HealthServer {
  port: number;
  /** Services asked for, in order. */
  asked: string[];
  close(): Promise<void>;
}

export async function startHealthServer(
  statuses: Map<string, HealthStatus>,
  host = '127.0.0.1',
  port = 0,
): Promise<HealthServer> {
  const asked: string[] = [];
  const server: Http2Server = createServer();
  server.on('stream', (stream: ServerHttp2Stream, headers) => {
    stream.on('error', () => {});
    if (headers[':path'] !== '/grpc.health.v1.Health/Check')
      return stream.respond(
        { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12' },
        { endStream: true },
      );
    const chunks: Buffer[] = [];
    stream.on('data', (d: Buffer) => chunks.push(d));
    stream.on('end', () => {
      const body = Buffer.concat(chunks);
      const { service } = Request.toObject(Request.decode(body.subarray(5, 5 + body.readUInt32BE(1)))) as {
        service?: string;
      };
      asked.push(service ?? '');
      const status = statuses.get(service ?? '');
      if (status === 'hang') return;
      if (status === undefined)
        return stream.respond(
          {
            ':status': 200,
            'content-type': 'application/grpc',
            'grpc-status': '5',
            'grpc-message': 'unknown service',
          },
          { endStream: true },
        );
      const message = Buffer.from(Response.encode(Response.fromObject({ status })).finish());
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(message.length, 1);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(Buffer.concat([prefix, message]));
    });
  });
  await new Promise<void>((r) => server.listen(port, host, r));
  const sessions = new Set<{ destroy(): void }>();
  server.on('session', (s) => (sessions.add(s), s.on('close', () => sessions.delete(s))));
  return {
    port: (server.address() as AddressInfo).port,
    asked,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sessions) s.destroy();
        server.close(() => r());
      }),
  };
}

if (import.meta.main) {
  const [address = '', ...pairs] = process.argv.slice(2);
  const at = address.lastIndexOf(':');
  const statuses = new Map(
    pairs.map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1) as HealthStatus] as const),
  );
  await startHealthServer(statuses, address.slice(0, at), Number(address.slice(at + 1)));
  process.stdout.write(`listening ${address}\n`);
}
