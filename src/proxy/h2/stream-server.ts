import {
  createServer,
  type Http2Server,
  type Http2Session,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import type { Socket } from 'node:net';
import type { Clock } from '../../shared/clock.ts';
import type { OnRejected, ServerLimits } from '../server.ts';
import { answerError } from './forward.ts';
import { isGrpc } from './grpc.ts';
import { headersProblem, SessionIdle, watchRequestBody } from './stream-limits.ts';

/** The streams of a listener's HTTP/2 connections, with the connection each came on. */
export type H2StreamHandler = (
  stream: ServerHttp2Stream,
  headers: IncomingHttpHeaders,
  socket: Socket,
) => void;

export interface StreamServer {
  server: Http2Server;
  /** Serves an accepted connection; head holds bytes already read from it (a sniffed preface). */
  serve(socket: Socket, head?: Buffer): void;
}

export interface StreamServerOptions {
  /** The listener's HTTP/1.1 limits, applied to HTTP/2 too (docs/data-path.md, HTTP/2 limits). */
  limits: ServerLimits;
  clock: Clock;
  onSession?: (s: Http2Session) => void;
  /** A stream the limits refused before it reached the handler (431). */
  onRejected?: OnRejected;
}

/** :method, :scheme, :authority, :path; node:http2 counts them against maxHeaderListPairs. */
const PSEUDO_HEADERS = 4;

/**
 * An HTTP/2 server that never listens: listeners hand it connections they accepted (h2c after
 * sniffing, h2 after a TLS handshake). Each stream is passed on with its connection, which tells
 * the peer, its original destination, or its mesh identity.
 */
export function streamServer(onStream: H2StreamHandler, o: StreamServerOptions): StreamServer {
  const { limits, clock } = o;
  const server = createServer({
    settings: {
      maxConcurrentStreams: limits.maxConcurrentStreams,
      // Advertised, and a larger header list is refused with RST_STREAM(ENHANCE_YOUR_CALM).
      maxHeaderListSize: limits.maxHeaderBytes,
      initialWindowSize: 1024 * 1024,
    },
    // One field past the limit still reaches headersProblem (a 431, as on HTTP/1.1); more is reset.
    maxHeaderListPairs: limits.maxHeaders + PSEUDO_HEADERS + 1,
    maxSessionMemory: 64,
  });
  const sockets = new WeakMap<Http2Session, Socket>();
  const idle = new WeakMap<Http2Session, SessionIdle>();
  let handing: Socket | undefined;
  server.on('session', (session: Http2Session) => {
    // Emitted while the connection is handed over; session.socket is only a guarded proxy of it.
    if (handing) sockets.set(session, handing);
    idle.set(session, new SessionIdle(session, limits.keepAliveTimeoutMs, clock));
    session.on('error', () => {});
    o.onSession?.(session);
  });
  server.on(
    'stream',
    (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _flags: number, raw: string[]) => {
      const session = stream.session as Http2Session;
      idle.get(session)?.track(stream);
      const socket = sockets.get(session);
      if (!socket) return void stream.close();
      const grpc = isGrpc(headers);
      const problem = headersProblem(raw, limits);
      if (problem) {
        stream.on('error', () => {});
        const h = answerError(stream, grpc, 'headers_too_large', problem);
        return void o.onRejected?.('headers_too_large', Number(h[':status']));
      }
      // gRPC calls are bounded by their own deadline: a client stream may rightly pause long.
      if (!grpc) watchRequestBody(stream, limits, clock);
      onStream(stream, headers, socket);
    },
  );
  return {
    server,
    serve(socket, head) {
      // The session reads what is buffered on the socket first (the sniffed bytes), then its
      // handle. The socket must not be resumed here: flowing with no 'data' listener would drop them.
      handing = socket;
      try {
        if (head && head.length > 0) socket.unshift(head);
        server.emit('connection', socket);
      } finally {
        handing = undefined;
      }
    },
  };
}
