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
