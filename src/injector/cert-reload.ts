import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createSecureContext } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import type { Clock, Timer } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';

export interface KeyPair {
  cert: Buffer;
  key: Buffer;
}

export interface CertReloaderOptions {
  certFile: string;
  keyFile: string;
  clock: Clock;
  log: Logger;
  /** Safety net behind the directory watch, which can miss events on some filesystems. */
  pollMs?: number;
  /** Warn when the certificate expires sooner than this. */
  expiryWarningMs?: number;
}

const DAY = 86_400_000;

/**
 * Keeps the serving certificate current without a restart. A Secret volume swaps its `..data`
 * symlink, so the directory is watched (not the file inode) and also polled. A pair that does
 * not load (half-written, key and certificate from different rotations) is ignored with a warning
 * and the previous one keeps serving; the next event or poll picks up the finished pair.
 */
export class CertReloader {
  readonly #opts: CertReloaderOptions;
  #current: KeyPair | undefined;
  #timer: Timer | undefined;
  #watchers: FSWatcher[] = [];
  #onChange: (pair: KeyPair) => void = () => {};
  #checking: Promise<boolean> | undefined;

  constructor(opts: CertReloaderOptions) {
    this.#opts = opts;
  }

  /** The first load: an unusable pair here is fatal, there is nothing to fall back to. */
  async load(): Promise<KeyPair> {
    const pair = await this.#read();
    this.#validate(pair);
    this.#current = pair;
    return pair;
  }

  get current(): KeyPair | undefined {
    return this.#current;
  }

  /** Re-reads the files; true when a new valid pair was installed. Concurrent calls share one read. */
  check(): Promise<boolean> {
    this.#checking ??= this.#check().finally(() => (this.#checking = undefined));
    return this.#checking;
  }

  start(onChange: (pair: KeyPair) => void): void {
    this.#onChange = onChange;
    const dirs = new Set([path.dirname(this.#opts.certFile), path.dirname(this.#opts.keyFile)]);
    try {
      for (const dir of dirs) {
        const w = watch(dir, { persistent: false }, () => void this.check());
        w.on('error', () => w.close());
        this.#watchers.push(w);
      }
    } catch (e) {
      this.#opts.log.warn('certificate directory watch failed; polling only', { error: errorMessage(e) });
    }
    this.#schedule();
  }

  stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    for (const w of this.#watchers.splice(0)) w.close();
  }

  #schedule(): void {
    this.#timer = this.#opts.clock.setTimer(this.#opts.pollMs ?? 10_000, () => {
      void this.check().finally(() => {
        if (this.#timer) this.#schedule();
      });
    });
  }

  async #check(): Promise<boolean> {
    let pair: KeyPair;
    try {
      pair = await this.#read();
      if (this.#current && pair.cert.equals(this.#current.cert) && pair.key.equals(this.#current.key))
        return false;
      this.#validate(pair);
    } catch (e) {
      this.#opts.log.warn('new serving certificate not loaded; keeping the previous one', {
        error: errorMessage(e),
      });
      return false;
    }
    this.#current = pair;
    this.#onChange(pair);
    return true;
  }

  async #read(): Promise<KeyPair> {
    const [cert, key] = await Promise.all([readFile(this.#opts.certFile), readFile(this.#opts.keyFile)]);
    return { cert, key };
  }

  /**
   * Throws when the pair cannot serve (unparsable, or key and certificate do not match). An
   * expired or nearly expired one still loads, loudly: it is what the operator gave us, and
   * refusing it would only turn a visible TLS error into a crash loop.
   */
  #validate(pair: KeyPair): void {
    createSecureContext(pair);
    const x509 = new X509Certificate(pair.cert);
    const expires = Date.parse(x509.validTo);
    const now = this.#opts.clock.now();
    const fields = { subject: x509.subject, expires: new Date(expires).toISOString() };
    if (expires <= now) this.#opts.log.error('serving certificate has expired; rotate it', fields);
    else if (expires - now < (this.#opts.expiryWarningMs ?? 14 * DAY))
      this.#opts.log.warn('serving certificate expires soon; rotate it', fields);
    else this.#opts.log.info('serving certificate loaded', fields);
  }
}
