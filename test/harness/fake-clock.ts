import { sleepOn, type Clock, type Timer } from '../../src/shared/clock.ts';

/** A manual clock for tests: time moves only when advance() is called. */
export class FakeClock implements Clock {
  #now: number;
  #timers: { at: number; seq: number; fn: () => void; live: boolean }[] = [];
  #seq = 0;

  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const entry = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn, live: true };
    this.#timers.push(entry);
    return { cancel: () => void (entry.live = false) };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** Pending timers, for assertions such as "a retry is scheduled in 800 ms". */
  pending(): number[] {
    return this.#timers.filter((t) => t.live).map((t) => t.at - this.#now);
  }

  /** Moves time forward, firing due timers in order and letting promise callbacks run between them. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    for (;;) {
      await flushMicrotasks();
      const due = this.#timers
        .filter((t) => t.live && t.at <= end)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      due.live = false;
      this.#now = due.at;
      due.fn();
    }
    this.#timers = this.#timers.filter((t) => t.live);
    this.#now = end;
    await flushMicrotasks();
  }
}

async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((r) => setImmediate(r));
}
