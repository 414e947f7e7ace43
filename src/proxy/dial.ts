import { connect, type Socket } from 'node:net';
import type { Clock } from '../shared/clock.ts';

/**
 * How an upstream connection is opened: plain TCP by default, mutual TLS to a meshed endpoint
 * (the mesh dialer). The callback gets a connected socket (handshake done) or the reason.
 * `namespace` is the namespace of the Service whose endpoint this is (none for a passthrough
 * destination): a meshed server must prove an identity of that namespace. `meshed` is what
 * discovery says of the endpoint's mesh listener (see meshedAddresses); undefined when it does
 * not know.
 */
export type DialCallback = (err: NodeJS.ErrnoException | null, socket?: Socket) => void;
export type Dial = (
  host: string,
  port: number,
  cb: DialCallback,
  namespace?: string,
  meshed?: boolean,
) => void;

/**
 * The error code of a dial refused because the meshed server's identity is of another namespace
 * than the endpoint's Service: a failed connect (nothing was sent), never a plaintext fallback.
 */
export const MESH_PEER_NAMESPACE = 'ERR_MESH_PEER_NAMESPACE';

/**
 * The error code of a dial to an endpoint discovery lists as meshed while this sidecar holds no
 * certificate: a failed connect, since such an endpoint is never dialled in plaintext.
 */
export const MESH_NO_CERTIFICATE = 'ERR_MESH_NO_CERTIFICATE';

/** Plain TCP with TCP_NODELAY, failed with ETIMEDOUT when not connected within timeoutMs. */
export const tcpDialer =
  (clock: Clock, timeoutMs: number): Dial =>
  (host, port, cb) => {
    const socket = connect({ host, port, noDelay: true });
    const timer = clock.setTimer(timeoutMs, () =>
      socket.destroy(Object.assign(new Error(`timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' })),
    );
    socket.once('connect', () => {
      timer.cancel();
      socket.removeAllListeners('error');
      cb(null, socket);
    });
    socket.once('error', (e) => {
      timer.cancel();
      cb(e);
    });
  };

type WriteCallback = (error?: NodeJS.ErrnoException | null) => void;

/**
 * An upstream may answer before it has read the whole request body (a 401 to an upload) and
 * close, which resets the connection: the next body write then fails with EPIPE or ECONNRESET
 * while the answer still waits to be read, and Node would destroy the socket and lose it (3 to 10
 * uploads in 10 became 502s). Such a write is taken as done and the rest of the body is dropped,
 * so the socket goes on being read: the HTTP client parses the answer that came, or sees the
 * close (a 502) if none did.
 */
export function keepReadingAfterWriteError(socket: Socket): void {
  let dropping = false;
  // Writable passes the same callback to every write: one wrapper per socket, not per write.
  let inner: WriteCallback | undefined;
  let guarded: WriteCallback | undefined;
  const guard = (cb: WriteCallback): WriteCallback => {
    if (cb !== inner || !guarded) {
      inner = cb;
      guarded = (err?: NodeJS.ErrnoException | null) => {
        const code = err?.code;
        if (code !== 'EPIPE' && code !== 'ECONNRESET') return cb(err);
        dropping = true;
        cb();
      };
    }
    return guarded;
  };
  const write = socket._write.bind(socket);
  socket._write = (chunk, encoding, cb) => (dropping ? cb() : write(chunk, encoding, guard(cb)));
  const writev = socket._writev?.bind(socket);
  if (writev) socket._writev = (chunks, cb) => (dropping ? cb() : writev(chunks, guard(cb)));
}
