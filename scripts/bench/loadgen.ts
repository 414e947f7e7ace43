// A bounded HTTP/1.1 load generator for loopback benchmarks (wrk2 is not packaged for Debian).
// Fixed-rate mode is open-loop with coordinated-omission correction: request i is DUE at
// start + i/rate whether or not a connection is free, and its latency counts from that due time,
// so a stall shows up in every request it delays (as in wrk2 and autocannon -R). The time from the
// actual write ("service time") and the generator's own lateness are reported beside it, so its
// timer granularity (Node timers: about 1 ms) can be told apart from the target's latency.
// Closed-loop mode keeps every connection busy for a fixed time (the fallback when wrk is absent).
import net from 'node:net';
import { performance } from 'node:perf_hooks';

export interface Target {
  host: string;
  port: number;
  /** Host header; for a sidecar's egress listener this is the Service authority. */
  authority: string;
  path?: string;
}

export interface FixedRateOptions {
  rate: number;
  durationMs: number;
  connections: number;
  /** A request unanswered this long counts as an error and its connection is replaced. */
  timeoutMs?: number;
}

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

export interface FixedRateResult {
  due: number;
  ok: number;
  errors: number;
  achievedRps: number;
  /** Milliseconds, measured from each request's due time (CO-corrected). */
  corrected: Percentiles;
  /** Milliseconds, measured from the actual write (what a closed-loop tool reports). */
  service: Percentiles;
  /** Milliseconds the generator sent after the due time. */
  lag: Percentiles;
}

export interface ClosedLoopResult {
  ok: number;
  errors: number;
  rps: number;
  latency: Percentiles;
}

export function percentiles(values: Float64Array | number[]): Percentiles {
  const sorted = Float64Array.from(values).sort();
  const at = (q: number): number =>
    sorted.length === 0 ? NaN : (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN);
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), p999: at(0.999), max: at(1) };
}

interface Pending {
  due: number;
  sent: number;
  index: number;
}

/** One keep-alive connection with a minimal response parser (Content-Length or chunked). */
class Conn {
  readonly sock: net.Socket;
  #buf: Buffer = Buffer.alloc(0);
  #onResponse: ((ok: boolean) => void) | undefined;
  busy = false;
  dead = false;

  constructor(t: Target, onClose: () => void) {
    this.sock = net.connect({ host: t.host, port: t.port, noDelay: true });
    this.sock.on('data', (d: Buffer) => this.#data(d));
    this.sock.on('error', () => undefined);
    this.sock.on('close', () => {
      this.dead = true;
      this.#finish(false);
      onClose();
    });
  }

  send(request: Buffer, onResponse: (ok: boolean) => void): void {
    this.busy = true;
    this.#onResponse = onResponse;
    this.sock.write(request);
  }

  #finish(ok: boolean): void {
    const cb = this.#onResponse;
    this.#onResponse = undefined;
    this.busy = false;
    cb?.(ok);
  }

  #data(d: Buffer): void {
    this.#buf = this.#buf.length === 0 ? d : Buffer.concat([this.#buf, d]);
    for (;;) {
      const end = this.#buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.#buf.subarray(0, end).toString('latin1');
      const status = Number(head.slice(9, 12));
      const len = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      let total: number;
      if (len) total = end + 4 + Number(len[1]);
      else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
        const term = this.#buf.indexOf('0\r\n\r\n', end + 4);
        if (term < 0) return;
        total = term + 5;
      } else total = end + 4;
      if (this.#buf.length < total) return;
      this.#buf = this.#buf.subarray(total);
      const close = /\r\nconnection:\s*close/i.test(head);
      this.#finish(status >= 200 && status < 400);
      if (close) this.sock.destroy();
    }
  }
}

function requestBytes(t: Target): Buffer {
  return Buffer.from(
    `GET ${t.path ?? '/'} HTTP/1.1\r\nHost: ${t.authority}\r\nUser-Agent: outrigger-bench\r\n\r\n`,
  );
}

/** Fixed-rate, CO-corrected run; bounded by count (rate x duration) and by a hard deadline. */
export async function fixedRate(t: Target, o: FixedRateOptions): Promise<FixedRateResult> {
  const request = requestBytes(t);
  const total = Math.floor((o.rate * o.durationMs) / 1000);
  const timeoutMs = o.timeoutMs ?? 2_000;
  const corrected = new Float64Array(total).fill(NaN);
  const service = new Float64Array(total).fill(NaN);
  const lag = new Float64Array(total).fill(NaN);
  let ok = 0;
  let errors = 0;
  let next = 0;
  let finished = 0;
  const backlog: Pending[] = [];
  const conns: Conn[] = [];
  const start = performance.now() + 20;
  const deadline = start + o.durationMs + timeoutMs + 1_000;

  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const complete = (p: Pending, success: boolean): void => {
    const now = performance.now();
    if (success) {
      ok++;
      corrected[p.index] = now - p.due;
      service[p.index] = now - p.sent;
    } else errors++;
    if (++finished === total) resolveDone();
  };

  const dispatch = (): void => {
    for (const c of conns) {
      if (backlog.length === 0) return;
      if (c.busy || c.dead) continue;
      const p = backlog.shift()!;
      p.sent = performance.now();
      lag[p.index] = p.sent - p.due;
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        complete(p, false);
        c.sock.destroy();
      }, timeoutMs);
      c.send(request, (success) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        complete(p, success);
        dispatch();
      });
    }
  };

  const open = (i: number): void => {
    conns[i] = new Conn(t, () => {
      if (performance.now() < deadline && finished < total) setTimeout(() => open(i), 10);
    });
  };
  for (let i = 0; i < o.connections; i++) open(i);

  const tick = (): void => {
    const now = performance.now();
    const dueNow = Math.min(total, Math.floor(((now - start) * o.rate) / 1000) + 1);
    while (next < dueNow) {
      backlog.push({ due: start + (next * 1000) / o.rate, sent: NaN, index: next });
      next++;
    }
    dispatch();
    if (next < total && now < deadline) {
      const wait = start + (next * 1000) / o.rate - performance.now();
      setTimeout(tick, Math.max(0, Math.floor(wait)));
    }
  };
  setTimeout(tick, 20);
  const guard = setTimeout(resolveDone, deadline - performance.now());
  await done;
  clearTimeout(guard);
  for (const c of conns) c.sock.destroy();
  const elapsed = (performance.now() - start) / 1000;
  const valid = (a: Float64Array): number[] => [...a].filter((v) => !Number.isNaN(v));
  errors += total - ok - errors;
  return {
    due: total,
    ok,
    errors,
    achievedRps: ok / elapsed,
    corrected: percentiles(valid(corrected)),
    service: percentiles(valid(service)),
    lag: percentiles(valid(lag)),
  };
}

/** Closed loop: every connection sends its next request as soon as the last one is answered. */
export async function closedLoop(
  t: Target,
  o: { connections: number; durationMs: number },
): Promise<ClosedLoopResult> {
  const request = requestBytes(t);
  const samples: number[] = [];
  let ok = 0;
  let errors = 0;
  const start = performance.now();
  const end = start + o.durationMs;
  await Promise.all(
    Array.from(
      { length: o.connections },
      () =>
        new Promise<void>((resolve) => {
          const c = new Conn(t, resolve);
          const loop = (): void => {
            if (performance.now() >= end || c.dead) {
              c.sock.destroy();
              return;
            }
            const sent = performance.now();
            c.send(request, (success) => {
              if (success) {
                ok++;
                if (samples.length < 1_000_000) samples.push(performance.now() - sent);
              } else errors++;
              loop();
            });
          };
          c.sock.once('connect', loop);
        }),
    ),
  );
  return { ok, errors, rps: ok / ((performance.now() - start) / 1000), latency: percentiles(samples) };
}
