/**
 * The port the egress listener consumes from transparent capture. The capture engineer implements
 * it as `originalDestination` in src/proxy/capture/original-destination.ts (getsockopt
 * SO_ORIGINAL_DST, IPv4 and IPv6); src/compose/sidecar.ts injects it. Explicit mode passes none.
 */
import type { Socket } from 'node:net';

export interface Destination {
  address: string;
  port: number;
}

/** The pre-REDIRECT destination of an accepted socket, or undefined when it was not redirected. */
export type OriginalDestination = (socket: Socket) => Destination | undefined;
