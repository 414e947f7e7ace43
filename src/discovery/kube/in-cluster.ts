import type { Identity } from '../../identity/token-source.ts';
import type { KubeConnection } from './connection.ts';

/** The sidecar's own connection: the projected token (re-read on rotation and after a 401) and CA. */
export function identityConnection(server: URL, id: Identity): KubeConnection {
  const ca = id.caPem();
  return {
    server,
    ...(ca ? { ca } : {}),
    authorization: () => `Bearer ${id.token()}`,
    unauthorized: () => id.refresh(),
  };
}
