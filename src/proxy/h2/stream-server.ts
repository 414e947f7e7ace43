import {
  createServer,
  type Http2Server,
  type Http2Session,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import type { Socket } from 'node:net';

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

/**
 * An HTTP/2 server that never listens: listeners hand it connections they accepted (h2c after
 * sniffing, h2 after a TLS handshake). Each stream is passed on with its connection, which tells
 * the peer, its original destination, or its mesh identity.
 */
export function streamServer(onStream: H2StreamHandler, onSession?: (s: Http2Session) => void): StreamServer {
  const server = createServer({
    // Node's default is unlimited; 1,000 bounds what one client connection can hold open.
    settings: { maxConcurrentStreams: 1_000, initialWindowSize: 1024 * 1024 },
    maxSessionMemory: 64,
  });
  const sockets = new WeakMap<Http2Session, Socket>();
  let handing: Socket | undefined;
  server.on('session', (session: Http2Session) => {
    // Emitted while the connection is handed over; session.socket is only a guarded proxy of it.
    if (handing) sockets.set(session, handing);
    session.on('error', () => {});
    onSession?.(session);
  });
  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    const socket = sockets.get(stream.session as Http2Session);
    if (!socket) return void stream.close();
    onStream(stream, headers, socket);
  });
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
