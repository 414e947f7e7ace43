import {
  connect,
  createServer,
  type ClientHttp2Session,
  type Http2Server,
  type Http2Session,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Stream,
  type Settings,
} from 'node:http2';
import type { AddressInfo } from 'node:net';

/** Plain node:http2 (h2c) backends and clients on loopback, for the HTTP/2 data-path tests. */
export interface H2Backend {
  port: number;
  server: Http2Server;
  /** Request headers of every stream the backend accepted. */
  streams: IncomingHttpHeaders[];
  close(): Promise<void>;
}

export type H2Handle = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, port: number) => void;

/** By default a gRPC-shaped echo: the body back in one response, then OK trailers naming the port. */
export const echo: H2Handle = (stream, _headers, port) => {
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  stream.on('end', () => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'x-port': String(port) }));
    stream.end(Buffer.concat(chunks));
  });
};

export async function startH2Backend(
  handle: H2Handle = echo,
  settings: Settings = {},
  host = '127.0.0.1',
): Promise<H2Backend> {
  const streams: IncomingHttpHeaders[] = [];
  const server = createServer({ settings });
  const port = await new Promise<number>((r) =>
    server.listen(0, host, () => r((server.address() as AddressInfo).port)),
  );
  server.on('stream', (stream, headers) => {
    streams.push(headers);
    stream.on('error', () => {});
    handle(stream, headers, port);
  });
  const sessions = new Set<Http2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.once('close', () => sessions.delete(s));
  });
  return {
    port,
    server,
    streams,
    close: () =>
      new Promise((r) => {
        for (const s of sessions) s.destroy();
        server.close(() => r());
      }),
  };
}

export interface H2Reply {
  headers: IncomingHttpHeaders;
  body: Buffer;
  trailers: IncomingHttpHeaders;
  /** RST_STREAM code when the stream was reset, else 0. */
  rstCode: number;
}

/** One request on an existing session; resolves when the stream has closed. */
export function h2Request(
  session: ClientHttp2Session,
  headers: OutgoingHttpHeaders,
  body?: Buffer | string,
): Promise<H2Reply> {
  return new Promise((resolve, reject) => {
    const s = session.request(headers, body === undefined ? { endStream: true } : {});
    let reply: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    s.on('response', (h) => (reply = h));
    s.on('trailers', (t: IncomingHttpHeaders) => (trailers = t));
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('close', () =>
      resolve({ headers: reply, body: Buffer.concat(chunks), trailers, rstCode: s.rstCode ?? 0 }),
    );
    // A reset stream still closes (and resolves with its code); other errors fail the request.
    s.once('error', (e: Error) => {
      if (s.rstCode === undefined) reject(e);
    });
    if (body !== undefined) s.end(body);
  });
}

export function h2Client(port: number): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const s = connect(`http://127.0.0.1:${port}`);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

/** gRPC request headers for a call to authority. */
export function grpcHeaders(
  authority: string,
  path = '/outrigger.v1.Test/Echo',
  extra: OutgoingHttpHeaders = {},
) {
  return {
    ':method': 'POST',
    ':path': path,
    ':authority': authority,
    'content-type': 'application/grpc',
    te: 'trailers',
    ...extra,
  } satisfies OutgoingHttpHeaders;
}
