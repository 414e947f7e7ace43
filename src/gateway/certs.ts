import { createSecureContext, type SecureContext } from 'node:tls';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { objectKey, type TlsSecret } from './objects.ts';
import type { GatewayRouteTable } from '../routes/table.ts';
import type { RouteTable } from './table.ts';

const checked = new WeakMap<TlsSecret, boolean>();

/**
 * Whether a Secret's pair makes a TLS context (a malformed certificate or a key that does not
 * match does not); checked once per Secret version.
 */
export function usableCertificate(secret: TlsSecret): boolean {
  let ok = checked.get(secret);
  if (ok === undefined) {
    try {
      createSecureContext({ cert: secret.cert, key: secret.key });
      ok = true;
    } catch {
      ok = false;
    }
    checked.set(secret, ok);
  }
  return ok;
}

/**
 * The certificates the HTTPS listener serves, chosen by SNI: the Secret of the most specific
 * Gateway HTTPS listener for the server name, else the Secret the Ingresses name for it (exact
 * host, then a one-label wildcard), else the default certificate. A client
 * without SNI, or a name no Ingress covers, gets the default; with no default configured the
 * handshake fails (there is nothing honest to present).
 *
 * Secure contexts are built once per Secret version and swapped live: a rotated Secret is served
 * from the next handshake, with no restart and no listener reload.
 */
export class Certificates {
  readonly #log: Logger;
  /** Secret key -> its context, rebuilt only when the Secret's content changes. */
  #contexts = new Map<string, { secret: TlsSecret; context: SecureContext }>();
  #table: RouteTable | undefined;
  #routes: GatewayRouteTable | undefined;
  #defaultKey: string | undefined;
  readonly #broken = new Map<string, string>();

  constructor(log: Logger) {
    this.#log = log;
  }

  /**
   * Replaces what is served. secrets holds every known TLS Secret by "namespace/name";
   * defaultSecret names the default certificate's Secret, if any.
   */
  update(
    table: RouteTable,
    secrets: ReadonlyMap<string, TlsSecret>,
    defaultSecret?: string,
    routes?: GatewayRouteTable,
  ): void {
    const wanted = table.tlsSecrets();
    for (const key of routes?.tlsSecrets() ?? []) wanted.add(key);
    if (defaultSecret) wanted.add(defaultSecret);
    const next = new Map<string, { secret: TlsSecret; context: SecureContext }>();
    for (const key of wanted) {
      const secret = secrets.get(key);
      if (!secret) continue;
      const have = this.#contexts.get(key);
      if (have && have.secret.cert === secret.cert && have.secret.key === secret.key) {
        next.set(key, have);
        continue;
      }
      const context = this.#build(secret);
      // A Secret updated with a broken certificate keeps serving its last good one.
      if (context) next.set(key, { secret, context });
      else if (have) next.set(key, have);
    }
    this.#contexts = next;
    this.#table = table;
    this.#routes = routes;
    this.#defaultKey = defaultSecret;
  }

  /** The context for a server name ('' without SNI), or undefined when there is none. */
  contextFor(serverName: string): SecureContext | undefined {
    if (serverName) {
      const listener = this.#routes?.tlsFor(serverName);
      const secret = listener ?? this.#table?.tlsFor(serverName)?.secret;
      const hit = secret && this.#contexts.get(secret);
      if (hit) return hit.context;
    }
    return this.#defaultKey ? this.#contexts.get(this.#defaultKey)?.context : undefined;
  }

  /** node:tls SNICallback. With no context, the server's own (the default certificate) is used. */
  readonly sniCallback = (serverName: string, cb: (err: Error | null, ctx?: SecureContext) => void): void => {
    const ctx = this.contextFor(serverName);
    if (ctx) cb(null, ctx);
    else cb(new Error(`no certificate for ${JSON.stringify(serverName)} and no default certificate`));
  };

  /** The default certificate as PEM, for clients without SNI (the server's own context). */
  defaultPem(): { cert: string; key: string } | undefined {
    const d = this.#defaultKey ? this.#contexts.get(this.#defaultKey) : undefined;
    return d && { cert: d.secret.cert, key: d.secret.key };
  }

  /** The served Secrets ("namespace/name"), for /debug and tests. */
  served(): string[] {
    return [...this.#contexts.keys()].sort();
  }

  #build(secret: TlsSecret): SecureContext | undefined {
    const key = objectKey(secret.metadata);
    try {
      const context = createSecureContext({ cert: secret.cert, key: secret.key });
      if (this.#broken.delete(key)) this.#log.info('TLS Secret usable again', { tlsSecret: key });
      return context;
    } catch (e) {
      const reason = errorMessage(e);
      // Once per distinct problem: a broken Secret must not log on every table rebuild.
      if (this.#broken.get(key) !== reason)
        this.#log.warn('TLS Secret unusable; not served', { tlsSecret: key, reason });
      this.#broken.set(key, reason);
      return undefined;
    }
  }
}
