import { everyOn, type Clock, type Timer } from '../shared/clock.ts';

/**
 * V8 lets its old generation grow by at least 8 MB plus the young generation's size between two
 * full collections, so a busy sidecar's private memory peaks 15-20 MB above what is alive
 * (docs/benchmarks.md, "Memory"). The heap step, when an operator asks for it, collects as soon as
 * the old generation has grown by a smaller step: memory held to the step, paid for in CPU (each
 * full collection marks everything alive). Off by default.
 */
export interface HeapStepDeps {
  clock: Clock;
  /** Bytes in use in V8's old generation (every space but the young one). */
  oldGenerationUsed: () => number;
  /** A full collection. */
  collect: () => void;
}

export interface HeapStepOptions {
  /** Growth since the previous full collection that triggers one. */
  stepBytes: number;
  /** How often the old generation's use is read. */
  checkMs: number;
}

export class HeapStep {
  readonly #deps: HeapStepDeps;
  readonly #o: HeapStepOptions;
  #timer: Timer | undefined;
  /** Old-generation use after the latest full collection, ours or V8's own. */
  #floor = 0;
  #collections = 0;

  constructor(deps: HeapStepDeps, options: HeapStepOptions) {
    this.#deps = deps;
    this.#o = options;
  }

  start(): void {
    this.#floor = this.#deps.oldGenerationUsed();
    this.#timer = everyOn(this.#deps.clock, this.#o.checkMs, () => this.#check());
  }

  stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  get collections(): number {
    return this.#collections;
  }

  #check(): void {
    const used = this.#deps.oldGenerationUsed();
    // Use only falls between checks when V8 has collected on its own: that is the new floor.
    if (used < this.#floor) this.#floor = used;
    if (used < this.#floor + this.#o.stepBytes) return;
    this.#deps.collect();
    this.#floor = this.#deps.oldGenerationUsed();
    this.#collections++;
  }
}
