import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { Clock, Timer } from '../shared/clock.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { found, markFresh, statusOf, type Known } from './freshness.ts';
import { parseObjects } from './manifest.ts';
import { mergeService } from './merge.ts';
import { sliceServiceName, type KEndpointSlice } from './objects.ts';
import type { DiscoveryStatus, Resolution, Resolver, ServiceKey } from './types.ts';
import { keyString } from './types.ts';

export interface FileResolverOptions {
  path: string;
  clock: Clock;
  logger: Logger;
  /** Period of the stat() fallback for file systems where fs.watch misses changes. */
  pollMs?: number;
  /** Settle time after a change event before re-reading (editors write in several steps). */
  debounceMs?: number;
}

export interface FileResolver extends Resolver {
  /** Re-reads the file now; resolves when applied (or rejected as invalid, keeping the old data). */
  reload(): Promise<void>;
}

/**
 * A Resolver over a YAML file of Services and EndpointSlices (`--source file:PATH`, `outrigger
 * demo`). The file is the whole truth: a successful read replaces everything, a failed or invalid
 * read changes nothing and marks the data stale (the same last-known-good rule as the API path).
 */
export function createFileResolver(opts: FileResolverOptions): FileResolver {
  return new FileSource(opts);
}

class FileSource implements FileResolver {
  readonly #opts: FileResolverOptions;
  readonly #log: Logger;
  #known = new Map<string, Known>();
  #byIP = new Map<string, ServiceKey>();
  #loaded = false;
  #first: Promise<void>;
  #watcher: FSWatcher | undefined;
  #poll: Timer | undefined;
  #debounce: Timer | undefined;
  #lastStat = '';
  #closed = false;
  #reading: Promise<void> | undefined;

  constructor(opts: FileResolverOptions) {
    this.#opts = opts;
    this.#log = opts.logger.child({ component: 'discovery-file', path: opts.path });
    this.#first = this.reload();
    this.#startWatching();
  }

  reload(): Promise<void> {
    // Serialize reads: a slow read must not overwrite a newer one that finished first.
    const run = async (): Promise<void> => {
      await this.#reading?.catch(() => undefined);
      await this.#read();
    };
    this.#reading = run();
    return this.#reading;
  }

  async #read(): Promise<void> {
    const now = this.#opts.clock.now();
    let text: string;
    try {
      const st = await stat(this.#opts.path);
      this.#lastStat = `${st.ino}:${st.size}:${st.mtimeMs}`;
      text = await readFile(this.#opts.path, 'utf8');
    } catch (e) {
      this.#fail(now, `cannot read ${this.#opts.path}: ${errorMessage(e)}`);
      return;
    }
    try {
      this.#apply(text, now);
    } catch (e) {
      this.#fail(now, `invalid ${this.#opts.path}: ${errorMessage(e)}`);
    }
  }

  #apply(text: string, now: number): void {
    const { services, slices } = parseObjects(text);
    const bySvc = new Map<string, KEndpointSlice[]>();
    for (const s of slices) {
      const name = sliceServiceName(s);
      if (!name) continue;
      const k = `${s.metadata.namespace}/${name}`;
      bySvc.set(k, [...(bySvc.get(k) ?? []), s]);
    }
    const known = new Map<string, Known>();
    const byIP = new Map<string, ServiceKey>();
    for (const svc of services) {
      const info = mergeService(svc, bySvc.get(`${svc.metadata.namespace}/${svc.metadata.name}`) ?? []);
      const k = keyString(info.key);
      const entry: Known = { info, source: 'file' };
      markFresh(entry, now, this.#log);
      known.set(k, entry);
      for (const ip of info.clusterIPs) byIP.set(ip, info.key);
    }
    if (this.#loaded && [...this.#known.values()].some((k) => k.stale))
      this.#log.info('file source readable again', { services: known.size });
    this.#known = known;
    this.#byIP = byIP;
    this.#loaded = true;
    this.#log.info('file source loaded', { services: services.length, endpointSlices: slices.length });
  }

  #fail(now: number, reason: string): void {
    for (const k of this.#known.values()) {
      if (!k.stale) k.stale = { since: now, reason };
    }
    // One line per failed read attempt that changes state; the poll does not re-log the same error.
    if (this.#lastError !== reason)
      this.#log.warn('file source unusable; keeping last-known-good', { reason });
    this.#lastError = reason;
  }

  #lastError = '';

  #startWatching(): void {
    const { path } = this.#opts;
    try {
      // The directory, not the file: a rename-over (kubectl, editors, ConfigMap ..data swaps)
      // replaces the inode a file watch would be attached to.
      this.#watcher = watch(dirname(path), { persistent: false }, (_ev, name) => {
        if (name === null || name === basename(path) || name.startsWith('..')) this.#schedule();
      });
      this.#watcher.on('error', () => undefined);
    } catch {
      this.#log.info('fs.watch unavailable; relying on periodic stat');
    }
    this.#armPoll();
  }

  #armPoll(): void {
    if (this.#closed) return;
    this.#poll = this.#opts.clock.setTimer(this.#opts.pollMs ?? 2_000, () => {
      void this.#checkStat().finally(() => this.#armPoll());
    });
  }

  async #checkStat(): Promise<void> {
    try {
      const st = await stat(this.#opts.path);
      if (`${st.ino}:${st.size}:${st.mtimeMs}` !== this.#lastStat) this.#schedule();
    } catch {
      if (this.#lastStat !== 'missing') {
        this.#lastStat = 'missing';
        this.#schedule();
      }
    }
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#debounce?.cancel();
    this.#debounce = this.#opts.clock.setTimer(this.#opts.debounceMs ?? 50, () => void this.reload());
  }

  async resolve(key: ServiceKey): Promise<Resolution> {
    await this.#first;
    return this.peek(key);
  }

  resolveNow(key: ServiceKey): Resolution | undefined {
    return this.#loaded ? this.peek(key) : undefined;
  }

  peek(key: ServiceKey): Resolution {
    const k = this.#known.get(keyString(key));
    if (k) return found(k);
    return this.#loaded ? { kind: 'absent' } : { kind: 'unknown', reason: 'file source not loaded' };
  }

  byClusterIP(ip: string): ServiceKey | undefined {
    return this.#byIP.get(ip);
  }

  ready(): boolean {
    return this.#loaded;
  }

  status(): DiscoveryStatus {
    return statusOf(this.#known.values(), {
      ready: this.#loaded,
      subscriptions: this.#known.size,
      watches: 0,
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#watcher?.close();
    this.#poll?.cancel();
    this.#debounce?.cancel();
    await this.#reading?.catch(() => undefined);
  }
}
