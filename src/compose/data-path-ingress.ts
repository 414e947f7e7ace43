import type { OriginalDestination } from '../proxy/capture-port.ts';
import { Forwarder } from '../proxy/forward.ts';
import { IngressHandler } from '../proxy/ingress.ts';
import type { HopObserver } from '../proxy/observer.ts';
import { podAddressCheck } from '../proxy/pod-addresses.ts';
import { UpstreamClient } from '../proxy/upstream-client.ts';
import type { Clock } from '../shared/clock.ts';
import type { DataPathConfig, DataPathDeps } from './data-path.ts';

export interface Ingress {
  /** Plaintext callers (and everyone in explicit mode). */
  ingress: IngressHandler;
  /** Meshed callers, with their verified identity; only with the mesh. */
  meshIngress: IngressHandler | undefined;
  /** The client to the app next door; the egress client when there is no mesh. */
  appUpstream: UpstreamClient;
  appHost: string;
}

/**
 * The app's inbound side: plaintext and meshed callers delivered to the app's ports. With the mesh,
 * egress dials endpoints through mutual TLS while the app next door stays plaintext, so the app gets
 * its own client.
 */
export function createIngress(
  config: DataPathConfig,
  deps: DataPathDeps,
  c: {
    upstream: UpstreamClient;
    forwarder: Forwarder;
    observer: HopObserver;
    clock: Clock;
    /** Every listener of this sidecar: a request to one of them is never delivered. */
    ownPorts: ReadonlySet<number>;
    originalDestination: OriginalDestination | undefined;
  },
): Ingress {
  const { clock } = c;
  const mesh = deps.mesh;
  const appUpstream = mesh
    ? new UpstreamClient({
        clock,
        connectTimeoutMs: config.connectTimeoutMs,
        responseTimeoutMs: config.requestTimeoutMs,
        idleTimeoutMs: config.idleTimeoutMs,
      })
    : c.upstream;
  const appForwarder = mesh
    ? new Forwarder({ client: appUpstream, clock, idleTimeoutMs: config.idleTimeoutMs })
    : c.forwarder;
  const appHost = deps.hosts?.app ?? '127.0.0.1';
  const common = {
    forwarder: appForwarder,
    observer: c.observer,
    log: deps.log.child({ listener: 'ingress' }),
    clock,
    appPorts: config.appPorts,
    appHost,
    ownPorts: c.ownPorts,
    isPodAddress: deps.isPodAddress ?? podAddressCheck({ podIPs: deps.podIP ? [deps.podIP] : [], clock }),
    connectTimeoutMs: config.connectTimeoutMs,
    idleTimeoutMs: config.idleTimeoutMs,
  };
  const ingress = new IngressHandler({
    ...common,
    ...(c.originalDestination ? { originalDestination: c.originalDestination } : {}),
    ...(mesh ? { refuse: mesh.refusePlaintext } : {}),
  });
  const transparent = config.capture === 'transparent';
  // Meshed callers: the app port from the handshake, their identity to the app.
  const meshIngress =
    mesh &&
    new IngressHandler({
      ...common,
      log: deps.log.child({ listener: 'mesh' }),
      // The caller names only the port; the address is ours (the pod's IP under transparent
      // capture). Explicit mode has no original destinations to honour: the app ports only.
      originalDestination: (socket) => {
        const d = mesh.destination(socket);
        return d && (transparent || config.appPorts.includes(d.port)) ? d : undefined;
      },
      isPodAddress: () => true,
      callerIdentity: mesh.callerIdentity,
      peer: mesh.peer,
    });
  return { ingress, meshIngress, appUpstream, appHost };
}
