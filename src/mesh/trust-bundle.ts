import { X509Certificate } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Clock, Timer } from '../shared/clock.ts';
import { errorMessage, OutriggerError } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { splitPemCertificates } from './ca.ts';

/**
 * The roots this sidecar trusts, from the ConfigMap the injector mounts. Reloaded live: the
 * directory is watched (a ConfigMap volume swaps a `..data` symlink) and polled behind the watch.
 * A file that holds no valid certificate (half-written, emptied by mistake) is ignored and the
 * previous bundle stays: distrusting every peer would take all mesh traffic down.
 */
export class TrustBundle {
  readonly #file: string;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #pollMs: number;
  #pem = '';
  #listeners: ((pem: string) => void)[] = [];
  #watcher: FSWatcher | undefined;
  #timer: Timer | undefined;
  #reloads = 0;
  #closed = false;

  constructor(opts: { file: string; clock: Clock; log: Logger; pollMs?: number }) {
    this.#file = opts.file;
    this.#clock = opts.clock;
    this.#log = opts.log.child({ component: 'trust-bundle' });
    this.#pollMs = opts.pollMs ?? 30_000;
  }

  /** The first read: without roots no peer can be verified, so failing here is fatal. */
  async start(): Promise<void> {
    const pem = await this.#read().catch((e: unknown) => {
      throw new OutriggerError('config_invalid', `trust bundle ${this.#file}: ${errorMessage(e)}`);
    });
    this.#pem = pem;
    try {
      this.#watcher = watch(dirname(this.#file), { persistent: false }, () => void this.reload());
      this.#watcher.on('error', () => this.#watcher?.close());
    } catch {
      this.#log.info('trust bundle directory watch unavailable; polling only');
    }
    this.#poll();
  }

  pem(): string {
    return this.#pem;
  }

  get reloads(): number {
    return this.#reloads;
  }

  onChange(fn: (pem: string) => void): void {
    this.#listeners.push(fn);
  }

  /** Re-reads the file; true when the bundle changed. */
  async reload(): Promise<boolean> {
    let pem: string;
    try {
      pem = await this.#read();
    } catch (e) {
      this.#log.warn('trust bundle unreadable; keeping the previous one', { reason: errorMessage(e) });
      return false;
    }
    if (pem === this.#pem) return false;
    this.#pem = pem;
    this.#reloads++;
    this.#log.info('trust bundle reloaded', { certificates: splitPemCertificates(pem).length });
    for (const fn of this.#listeners) fn(pem);
    return true;
  }

  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#watcher?.close();
  }

  async #read(): Promise<string> {
    const text = await readFile(this.#file, 'utf8');
    const certs = splitPemCertificates(text);
    if (certs.length === 0) throw new Error('no PEM certificate in the file');
    for (const c of certs) new X509Certificate(c); // throws on a damaged certificate
    return certs.join('\n');
  }

  #poll(): void {
    if (this.#closed) return;
    this.#timer = this.#clock.setTimer(this.#pollMs, () => void this.reload().finally(() => this.#poll()));
  }
}
