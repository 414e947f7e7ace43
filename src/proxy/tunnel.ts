import type { Socket } from 'node:net';
import type { Clock } from '../shared/clock.ts';
import { tcpDialer, type Dial, type DialCallback } from './dial.ts';
import type { ForwardPlan, Upstream } from './forward.ts';
import type { Hop } from './observer.ts';

/**
 * Opaque byte streams: CONNECT tunnels and non-HTTP TCP. Connecting is retried on other endpoints
 * (no byte was sent yet); once connected the two sockets are piped and closed together. dial
 * (mutual TLS to meshed endpoints) replaces plain TCP when given.
 */
export type TunnelOpen =
  | { ok: true; upstream: Socket; up: Upstream; done: (failed: boolean) => void }
  | { ok: false; timedOut: boolean; detail: string };

export async function openUpstream(
  plan: ForwardPlan,
  hop: Hop,
  clock: Clock,
  connectTimeoutMs: number,
  dial: Dial = tcpDialer(clock, connectTimeoutMs),
): Promise<TunnelOpen> {
  const tried = new Set<string>();
  let detail = 'no endpoint to try';
  let timedOut = false;
  for (let attempt = 0; attempt < Math.max(plan.maxAttempts, 1); attempt++) {
    const up = plan.next(tried);
    if (!up) break;
    if (attempt > 0) {
      if (plan.budget && !plan.budget.tryWithdraw()) break;
      hop.addRetry('connect_failure');
    }
    tried.add(up.id);
    hop.setEndpoint(up.host, up.port);
    const done = plan.start(up);
    const r = await connectOnce(up, dial);
    if (r.ok) {
      done('success');
      return { ok: true, upstream: r.socket, up, done: () => {} };
    }
    done('connect_failure');
    detail = `connect to ${up.host}:${up.port} failed: ${r.detail}`;
    timedOut = r.timedOut;
  }
  return { ok: false, timedOut, detail };
}

function connectOnce(
  up: Upstream,
  dial: Dial,
): Promise<{ ok: true; socket: Socket } | { ok: false; timedOut: boolean; detail: string }> {
  const open = (cb: DialCallback): void => dial(up.host, up.port, cb, up.namespace, up.meshed);
  return new Promise((resolve) =>
    open((err, socket) => {
      if (socket && !err) return resolve({ ok: true, socket });
      const code = err?.code;
      const timedOut = code === 'ETIMEDOUT';
      resolve({
        ok: false,
        timedOut,
        detail: (timedOut ? err?.message : code) ?? err?.message ?? 'no socket',
      });
    }),
  );
}

/**
 * Pipes two sockets both ways; resolves when both are closed. An end is passed on (pipe ends the
 * other side once its writes are flushed); an error or the idle timeout destroys both.
 */
export function splice(a: Socket, b: Socket, idleMs: number): Promise<void> {
  return new Promise((resolve) => {
    let closed = 0;
    const kill = (): void => {
      a.destroy();
      b.destroy();
    };
    for (const s of [a, b]) {
      s.setTimeout(idleMs, kill);
      s.on('error', kill);
      s.once('close', (hadError) => {
        // A side destroyed without a FIN never emits 'end', so pipe() would not pass it on.
        if (hadError) kill();
        else (s === a ? b : a).end();
        if (++closed === 2) resolve();
      });
    }
    a.pipe(b);
    b.pipe(a);
  });
}
