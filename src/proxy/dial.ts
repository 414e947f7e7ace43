import { connect, type Socket } from 'node:net';
import type { Clock } from '../shared/clock.ts';

/**
 * How an upstream connection is opened: plain TCP by default, mutual TLS to a meshed endpoint
 * (the mesh dialer). The callback gets a connected socket (handshake done) or the reason.
 */
export type DialCallback = (err: NodeJS.ErrnoException | null, socket?: Socket) => void;
export type Dial = (host: string, port: number, cb: DialCallback) => void;

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
