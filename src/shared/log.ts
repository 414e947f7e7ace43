/**
 * Structured JSON logs on stderr, one object per line. Small on purpose: a sidecar runs in every
 * pod, so no logging framework. Secrets are kept out by construction: callers never pass tokens,
 * and redact() strips the known sensitive field names before anything is printed.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export const logLevels: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

export type Fields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  child(fields: Fields): Logger;
  setLevel(level: LogLevel): void;
}

const SENSITIVE = /^(token|authorization|bearer|password|secret|key|cert|ca|cadata|keydata|certdata)$/i;

export function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return { message: value.message, name: value.name };
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value))
    out[k] = SENSITIVE.test(k) ? '[redacted]' : redact(v, depth + 1);
  return out;
}

export function createLogger(
  opts: { level?: LogLevel; write?: (line: string) => void; base?: Fields; now?: () => number } = {},
): Logger {
  const state = { level: logLevels.indexOf(opts.level ?? 'info') };
  const write = opts.write ?? ((line: string) => process.stderr.write(line + '\n'));
  const now = opts.now ?? Date.now;
  const make = (base: Fields): Logger => {
    const emit = (level: LogLevel, msg: string, fields?: Fields): void => {
      if (logLevels.indexOf(level) < state.level) return;
      const rec = {
        time: new Date(now()).toISOString(),
        level,
        msg,
        ...base,
        ...(redact(fields ?? {}) as Fields),
      };
      write(JSON.stringify(rec));
    };
    return {
      debug: (m, f) => emit('debug', m, f),
      info: (m, f) => emit('info', m, f),
      warn: (m, f) => emit('warn', m, f),
      error: (m, f) => emit('error', m, f),
      child: (fields) => make({ ...base, ...(redact(fields) as Fields) }),
      setLevel: (level) => void (state.level = logLevels.indexOf(level)),
    };
  };
  return make(opts.base ?? {});
}
