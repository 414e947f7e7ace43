import type { Logger } from '../shared/log.ts';

/**
 * Resolves when the process has shut down after SIGTERM or SIGINT: the first signal runs
 * shutdown() (drain, then close), a second one (an impatient Ctrl-C) exits at once.
 */
export function untilStopped(
  log: Logger,
  drainSeconds: number,
  shutdown: () => Promise<unknown>,
): Promise<void> {
  return new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) {
        log.warn('second signal: exiting without finishing the drain', { signal });
        process.exit(1);
      }
      stopping = true;
      log.info('shutting down', { signal, drainSeconds });
      void shutdown().finally(resolve);
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
}
