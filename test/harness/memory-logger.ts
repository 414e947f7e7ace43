import { createLogger, type Fields, type Logger, type LogLevel } from '../../src/shared/log.ts';

/** A logger that records lines, for tests. */
export function memoryLogger(level: LogLevel = 'debug'): Logger & { lines: Fields[] } {
  const lines: Fields[] = [];
  const logger = createLogger({ level, write: (l) => lines.push(JSON.parse(l) as Fields) });
  return Object.assign(logger, { lines });
}
