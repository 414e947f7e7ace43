import https from 'node:https';
import type { ClientRequest } from 'node:http';

export interface WatchEvent {
  type: string;
  object: { metadata?: { name?: string; resourceVersion?: string }; code?: number; [k: string]: unknown };
}

export interface WatchStream {
  events: WatchEvent[];
  /** HTTP status of the watch response. */
  status: Promise<number>;
  /** Resolves when the stream ends or fails: 'end' or the error's code/message. */
  ended: Promise<string>;
  /** Resolves with the first event that satisfies pred (already received ones count). */
  next(pred: (e: WatchEvent) => boolean, timeoutMs?: number): Promise<WatchEvent>;
  close(): void;
}

/** A raw watch for harness tests: newline-delimited JSON events from a real API server. */
export function openWatch(server: string, caPem: string, token: string, urlPath: string): WatchStream {
  const events: WatchEvent[] = [];
  const waiters: { pred: (e: WatchEvent) => boolean; resolve: (e: WatchEvent) => void }[] = [];
  let resolveStatus!: (n: number) => void;
  let resolveEnded!: (s: string) => void;
  const status = new Promise<number>((r) => (resolveStatus = r));
  const ended = new Promise<string>((r) => (resolveEnded = r));
  const push = (e: WatchEvent): void => {
    events.push(e);
    for (const w of [...waiters]) {
      if (w.pred(e)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(e);
      }
    }
  };
  const req: ClientRequest = https.get(
    new URL(urlPath, server),
    { ca: caPem, headers: { authorization: `Bearer ${token}` }, agent: false },
    (res) => {
      resolveStatus(res.statusCode ?? 0);
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line) push(JSON.parse(line) as WatchEvent);
        }
      });
      res.on('end', () => resolveEnded('end'));
      res.on('error', (e: NodeJS.ErrnoException) => resolveEnded(e.code ?? e.message));
      // A server that dies mid-stream aborts the response without 'end'.
      res.on('close', () => resolveEnded(res.complete ? 'end' : 'aborted'));
    },
  );
  req.on('error', (e: NodeJS.ErrnoException) => {
    resolveStatus(0);
    resolveEnded(e.code ?? e.message);
  });
  return {
    events,
    status,
    ended,
    next(pred, timeoutMs = 10_000) {
      const hit = events.find(pred);
      if (hit) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no matching watch event within ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push({
          pred,
          resolve: (e) => {
            clearTimeout(timer);
            resolve(e);
          },
        });
      });
    },
    close: () => req.destroy(),
  };
}
