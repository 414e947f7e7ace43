import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { PeerIdentity } from '../proxy/observer.ts';
import { peerSpiffeId } from './mesh-tls.ts';
import { formatSpiffeId } from './spiffe.ts';

/** Distinct caller labels a sidecar keeps before it folds the rest into `other` (bounded series). */
export const MAX_CALLER_LABELS = 100;
export const OTHER_CALLERS = 'other';

/**
 * The meshed caller of a connection for spans and metric labels: its SPIFFE id, and the label
 * `namespace/serviceaccount` (the trust domain is always ours on the mesh listener). Resolved once
 * per connection, and one shared object per caller, so a request pays a WeakMap lookup. Past
 * `max` distinct callers the label is `other`: a sidecar's series stay bounded whoever calls it.
 */
export function callerPeers(
  trustDomain: string,
  max = MAX_CALLER_LABELS,
): (socket: Socket) => PeerIdentity | undefined {
  const bySocket = new WeakMap<Socket, PeerIdentity | null>();
  const known = new Map<string, PeerIdentity>();
  const peerOf = (socket: Socket): PeerIdentity | null => {
    // Only the mesh listener's sockets are TLS; anything else has no verified caller.
    if (!('getPeerX509Certificate' in socket)) return null;
    const caller = peerSpiffeId(socket as TLSSocket, trustDomain);
    if (!caller) return null;
    const id = formatSpiffeId(caller);
    const seen = known.get(id);
    if (seen) return seen;
    if (known.size >= max) return { id, label: OTHER_CALLERS };
    const peer = { id, label: `${caller.namespace}/${caller.serviceAccount}` };
    known.set(id, peer);
    return peer;
  };
  return (socket) => {
    let p = bySocket.get(socket);
    if (p === undefined) bySocket.set(socket, (p = peerOf(socket)));
    return p ?? undefined;
  };
}
