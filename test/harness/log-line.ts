import type { Readable } from 'node:stream';

/**
 * The fields of the first JSON log line with this message on a spawned process's stream: how a test
 * learns the port a process bound when it was told to listen on port 0.
 */
export function logLine(stream: Readable, msg: string, timeoutMs = 30_000): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const timer = setTimeout(() => {
      stream.off('data', onData);
      reject(new Error(`no log line ${JSON.stringify(msg)} within ${timeoutMs} ms; got:\n${buffered}`));
    }, timeoutMs);
    const onData = (d: Buffer): void => {
      buffered += d.toString();
      for (const line of buffered.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const rec = JSON.parse(line) as Record<string, unknown>;
          if (rec.msg !== msg) continue;
          clearTimeout(timer);
          stream.off('data', onData);
          resolve(rec);
          return;
        } catch {
          // A line still being written: the next chunk completes it.
        }
      }
    };
    stream.on('data', onData);
  });
}
