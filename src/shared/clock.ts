/**
 * Time as a port, so backoff, staleness and timeouts run on a fake clock in unit tests.
 * Timers are unref'd: a pending retry must never keep the process alive on its own.
 */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimer(ms: number, fn: () => void): Timer;
  /** Resolves after ms, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
  sleep: (ms, signal) => sleepOn(systemClock, ms, signal),
};

export function sleepOn(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = (): void => {
      timer.cancel();
      reject(signal?.reason as Error);
    };
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Runs fn every ms on the clock until the returned timer is cancelled (fn may cancel it). */
export function everyOn(clock: Clock, ms: number, fn: () => void): Timer {
  let current: Timer | undefined;
  let cancelled = false;
  const schedule = (): void => {
    current = clock.setTimer(ms, () => {
      fn();
      if (!cancelled) schedule();
    });
  };
  schedule();
  return {
    cancel: () => {
      cancelled = true;
      current?.cancel();
    },
  };
}

/** Randomness as a port: returns a number in [0, 1). */
export type Random = () => number;
export const systemRandom: Random = Math.random;
