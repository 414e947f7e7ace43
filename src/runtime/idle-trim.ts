import { everyOn, type Clock, type Timer } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';

/**
 * V8 keeps the pages a burst of traffic made it allocate: after a load the sidecar stays at its
 * peak (docs/benchmarks.md, "Memory"), and its own memory reducer's collections give back none of
 * it. Only a memory-reducing collection (V8's "last resort": several full collections, the young
 * generation shrunk, pooled pages unmapped) does, and it pauses the process for 50-150 ms. So the
 * trim runs only when the event loop has been quiet for a while and resident memory has grown since
 * the previous trim: nobody waits for it, and an idle process is never collected twice for nothing.
 */
export interface IdleTrimDeps {
  clock: Clock;
  /** The event loop's utilisation (0-1) since the previous call. */
  busy: () => number;
  /** Resident memory, bytes. */
  rss: () => number;
  /** A collection that returns freed memory to the system. */
  collect: () => void;
  log: Logger;
}

export interface IdleTrimOptions {
  /** How often the loop's utilisation is read. */
  checkMs: number;
  /** Consecutive quiet checks before a trim. */
  quietChecks: number;
  /** A check is quiet when the loop was busy less than this share of it. */
  quietBelow: number;
  /** Resident growth since the previous trim (or since start) that is worth a trim. */
  growthBytes: number;
}

export const IDLE_TRIM_DEFAULTS: IdleTrimOptions = {
  checkMs: 5_000,
  quietChecks: 2,
  // An idle sidecar's loop is 0.3-0.4 % busy (the loop-delay monitor wakes it 100 times a second),
  // up to ~0.9 % on a contended node; ~50 requests/s keep it above 1 %.
  quietBelow: 0.01,
  growthBytes: 4 * 1024 * 1024,
};

export class IdleTrim {
  readonly #deps: IdleTrimDeps;
  readonly #o: IdleTrimOptions;
  #timer: Timer | undefined;
  #quiet = 0;
  /** Resident memory after the previous trim; none before the first, which follows start-up. */
  #floor: number | undefined;
  #trims = 0;

  constructor(deps: IdleTrimDeps, options: Partial<IdleTrimOptions> = {}) {
    this.#deps = deps;
    this.#o = { ...IDLE_TRIM_DEFAULTS, ...options };
  }

  start(): void {
    this.#deps.busy();
    this.#timer = everyOn(this.#deps.clock, this.#o.checkMs, () => this.#check());
  }

  stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  get trims(): number {
    return this.#trims;
  }

  #check(): void {
    this.#quiet = this.#deps.busy() < this.#o.quietBelow ? this.#quiet + 1 : 0;
    if (this.#quiet < this.#o.quietChecks) return;
    const before = this.#deps.rss();
    if (this.#floor !== undefined && before < this.#floor + this.#o.growthBytes) return;
    const started = this.#deps.clock.now();
    this.#deps.collect();
    this.#floor = this.#deps.rss();
    this.#trims++;
    this.#quiet = 0;
    this.#deps.log.debug('memory trimmed after a quiet period', {
      residentMB: round(before),
      afterMB: round(this.#floor),
      pauseMs: this.#deps.clock.now() - started,
    });
  }
}

const round = (bytes: number): number => Math.round(bytes / 1048576);
