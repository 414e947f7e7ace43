import type { PodToken } from '../token/token-source.ts';
import type { KubeConnection } from './connection.ts';

/**
 * The sidecar's own connection: the projected token (re-read on rotation and after a 401) and CA.
 * `ca` is read when a connection is opened, so a rotated ca.crt is used by the next HTTP/2
 * connection (the HTTP/1.1 agent, only used behind HTTP/1.1 proxies, keeps its first CA).
 */
export function podTokenConnection(server: URL, id: PodToken): KubeConnection {
  return {
    server,
    get ca() {
      return id.caPem();
    },
    authorization: () => `Bearer ${id.token()}`,
    unauthorized: () => id.refresh(),
  };
}
