import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock, Timer } from '../shared/clock.ts';
import { errorMessage, OutriggerError } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';

/**
 * The sidecar's identity from its projected service-account volume: token, ca.crt, namespace.
 * The kubelet rotates the token by swapping the `..data` symlink (AtomicWriter), so the files are
 * re-read asynchronously when the directory changes, at least every refreshMs (<= 60 s, like
 * client-go), and on demand after a 401. A failed re-read keeps the last good token: the old one
 * is usually still valid for minutes, and an empty Authorization header never is.
 * The token is never logged; only its expiry (JWT exp) leaves this module, as a number.
 */
export interface PodToken {
  /** The current bearer token. Never log it. */
  token(): string;
  caPem(): string | undefined;
  namespace(): string | undefined;
  /** Token expiry in ms since the epoch (JWT exp), when the token is a JWT with one. */
  expiresAt(): number | undefined;
  /** Re-reads the directory now; true when the token changed. Concurrent calls share one read. */
  refresh(): Promise<boolean>;
  close(): void;
}

export interface TokenSourceOptions {
  dir: string;
  clock: Clock;
  logger: Logger;
  refreshMs?: number;
}

const MAX_REFRESH_MS = 60_000;

export async function openTokenSource(opts: TokenSourceOptions): Promise<PodToken> {
  const src = new TokenSource(opts);
  await src.first();
  return src;
}

class TokenSource implements PodToken {
  readonly #opts: TokenSourceOptions;
  readonly #log: Logger;
  #token = '';
  #ca: string | undefined;
  #ns: string | undefined;
  #exp: number | undefined;
  #inflight: Promise<boolean> | undefined;
  #timer: Timer | undefined;
  #debounce: Timer | undefined;
  #watcher: FSWatcher | undefined;
  #closed = false;
  #failing = false;

  constructor(opts: TokenSourceOptions) {
    this.#opts = opts;
    this.#log = opts.logger.child({ component: 'identity', dir: opts.dir });
  }

  async first(): Promise<void> {
    try {
      await this.#read();
    } catch (e) {
      throw new OutriggerError(
        'identity_unavailable',
        `cannot read the service-account token from ${this.#opts.dir}: ${errorMessage(e)}`,
      );
    }
    try {
      // The directory, not the token file: a ..data swap replaces the file the token path points to.
      this.#watcher = watch(this.#opts.dir, { persistent: false }, () => this.#soon());
      this.#watcher.on('error', () => undefined);
    } catch {
      this.#log.info('fs.watch unavailable; re-reading on a timer only');
    }
    this.#arm();
  }

  token(): string {
    return this.#token;
  }
  caPem(): string | undefined {
    return this.#ca;
  }
  namespace(): string | undefined {
    return this.#ns;
  }
  expiresAt(): number | undefined {
    return this.#exp;
  }

  refresh(): Promise<boolean> {
    this.#inflight ??= this.#read()
      .then((changed) => {
        if (this.#failing) this.#log.info('service-account token readable again');
        this.#failing = false;
        return changed;
      })
      .catch((e: unknown) => {
        if (!this.#failing)
          this.#log.warn('cannot re-read the token; keeping the last one', { reason: errorMessage(e) });
        this.#failing = true;
        return false;
      })
      .finally(() => (this.#inflight = undefined));
    return this.#inflight;
  }

  async #read(): Promise<boolean> {
    const dir = this.#opts.dir;
    const token = (await readFile(join(dir, 'token'), 'utf8')).trim();
    if (!token) throw new Error('token file is empty');
    const [ca, ns] = await Promise.all([optional(join(dir, 'ca.crt')), optional(join(dir, 'namespace'))]);
    const changed = token !== this.#token;
    if (changed && this.#token)
      this.#log.info('service-account token rotated', { expiresAt: iso(jwtExpiry(token)) });
    this.#token = token;
    this.#exp = jwtExpiry(token);
    if (ca !== undefined) this.#ca = ca;
    if (ns !== undefined) this.#ns = ns.trim() || this.#ns;
    return changed;
  }

  #soon(): void {
    if (this.#closed) return;
    this.#debounce?.cancel();
    // The kubelet writes the new files, then swaps the symlink: read once things settle.
    this.#debounce = this.#opts.clock.setTimer(100, () => void this.refresh());
  }

  #arm(): void {
    if (this.#closed) return;
    const ms = Math.min(this.#opts.refreshMs ?? MAX_REFRESH_MS, MAX_REFRESH_MS);
    this.#timer = this.#opts.clock.setTimer(ms, () => {
      void this.refresh().finally(() => this.#arm());
    });
  }

  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#debounce?.cancel();
    this.#watcher?.close();
  }
}

async function optional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
}

const iso = (ms: number | undefined): string | undefined =>
  ms === undefined ? undefined : new Date(ms).toISOString();

/** exp of a JWT in ms, without verifying it (the API server does that); undefined if not a JWT. */
export function jwtExpiry(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (!payload) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof claims.exp === 'number' ? claims.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
