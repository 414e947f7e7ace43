import { createServer, type Server, type Socket } from 'node:net';
import { errorMessage } from '../shared/errors.ts';
import { listenOn } from '../shared/listen.ts';
import type { Logger } from '../shared/log.ts';
import type { Binding } from './addresses.ts';
import type { Via } from './http-route.ts';

/**
 * The pod ports of the Gateways' own addresses (addresses.ts): one TCP server per binding, whose
 * connections are handed to the gateway's one HTTP server (or its TLS terminator for an HTTPS
 * listener), so the limits and the handler are those of the shared ports. The handler asks via()
 * which Gateway and listener port a connection's local port belongs to.
 *
 * Bindings follow the route table, which is last-known-good: a port is closed only when the table
 * no longer has its Gateway or listener port, which a failed or partial read never causes. Its
 * open connections are closed with it: kept open, they would be served as the shared ports are.
 */
export interface GatewayPortsOptions {
  host: string;
  accept: { http: (s: Socket) => void; https?: (s: Socket) => void };
  log: Logger;
}

interface Open {
  binding: Binding;
  server: Server;
  listening: Promise<boolean>;
  sockets: Set<Socket>;
}

export class GatewayPorts {
  readonly #o: GatewayPortsOptions;
  readonly #open = new Map<number, Open>();
  readonly #unserved = new Set<string>();
  #closed = false;

  constructor(o: GatewayPortsOptions) {
    this.#o = o;
  }

  /** Opens the ports of new bindings and closes those of bindings gone; resolves once listening. */
  async bind(bindings: readonly Binding[]): Promise<void> {
    if (this.#closed) return;
    const want = new Map(bindings.map((b) => [b.podPort, b]));
    for (const [port, open] of this.#open) {
      const b = want.get(port);
      if (b && b.protocol === open.binding.protocol) open.binding = b;
      else this.#drop(port);
    }
    for (const b of want.values()) if (!this.#open.has(b.podPort)) this.#listen(b);
    await Promise.all([...this.#open.values()].map((o) => o.listening));
  }

  via(localPort: number | undefined): Via | undefined {
    const b = localPort === undefined ? undefined : this.#open.get(localPort)?.binding;
    return b && { gateway: b.gateway, port: b.port };
  }

  /** The pod ports listening, for /debug. */
  listening(): Binding[] {
    return [...this.#open.values()].map((o) => o.binding);
  }

  /** Stops accepting; connections open are the listeners' to drain. */
  close(): void {
    this.#closed = true;
    for (const { server } of this.#open.values()) server.close();
    this.#open.clear();
  }

  #listen(b: Binding): void {
    const accept = b.protocol === 'HTTPS' ? this.#o.accept.https : this.#o.accept.http;
    if (!accept) {
      // Once per binding: bind() runs at every table change.
      const key = `${b.gateway} ${b.port}`;
      if (!this.#unserved.has(key))
        this.#o.log.warn('HTTPS listener of a Gateway not served: the gateway has no HTTPS port', {
          gateway: b.gateway,
          port: b.port,
        });
      this.#unserved.add(key);
      return;
    }
    const sockets = new Set<Socket>();
    const server = createServer({ noDelay: true }, (s) => {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
      accept(s);
    });
    const listening = listenOn(server, b.podPort, this.#o.host).then(
      () => true,
      (e: unknown) => {
        // Forgotten, so that the next table tries again; requests keep the shared ports meanwhile.
        this.#o.log.warn('Gateway port not opened; retrying at the next change', {
          gateway: b.gateway,
          podPort: b.podPort,
          reason: errorMessage(e),
        });
        if (this.#open.get(b.podPort)?.server === server) this.#open.delete(b.podPort);
        return false;
      },
    );
    this.#open.set(b.podPort, { binding: b, server, listening, sockets });
  }

  #drop(port: number): void {
    const open = this.#open.get(port);
    open?.server.close();
    for (const s of open?.sockets ?? []) s.destroy();
    this.#open.delete(port);
  }
}
