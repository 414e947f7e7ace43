import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Timer } from '../shared/clock.ts';
import { MESH_NO_CERTIFICATE, MESH_PEER_NAMESPACE } from './dial.ts';
import { bodyUnread, stripHopByHop } from './headers.ts';
import type { AttemptResult, AttemptSpec, UpstreamClientOptions } from './upstream-client.ts';

/** Errors that mean nothing reached the upstream: the connection never opened. */
const CONNECT_ERRORS = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'EADDRNOTAVAIL',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_CONNECT_TIMEOUT',
  MESH_PEER_NAMESPACE,
  MESH_NO_CERTIFICATE,
]);

/** Errors of a connection that closed or was reset under a request, before any response. */
const RESET_ERRORS = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

/** undici's code for the response timeout; the connection of its own (own-connection.ts) uses it too. */
export const RESPONSE_TIMEOUT = 'UND_ERR_HEADERS_TIMEOUT';

/**
 * One attempt: decides its outcome from the client's callbacks (undici's, or the connection of
 * its own's in the same shape) and, once the response is taken, copies it into the ServerResponse
 * (status, headers without hop-by-hop ones, body with backpressure, trailers). An error before the
 * response is classified for the retry logic: a failed connect, a connection closed or reset
 * before any response, a timeout, or any other failure.
 */
export class ResponseWriter implements Dispatcher.DispatchHandler {
  readonly #res: ServerResponse;
  readonly #spec: AttemptSpec;
  readonly #o: UpstreamClientOptions;
  /** Runs only while the client is not reading (undici's body timer is off while paused). */
  #stalled: Timer | undefined;
  /** The route's response timeout (spec.responseTimeoutMs), until the response or another outcome. */
  #deadline: Timer | undefined;
  #controller: Dispatcher.DispatchController | undefined;
  #settled = false;
  #started = false;
  /** 'forward': the response goes downstream; 'drain': a status retry, its body is discarded. */
  #mode: 'none' | 'forward' | 'drain' | 'finished' = 'none';

  constructor(res: ServerResponse, spec: AttemptSpec, o: UpstreamClientOptions) {
    this.#res = res;
    this.#spec = spec;
    this.#o = o;
    res.on('close', this.#onClientClose);
    const ms = spec.responseTimeoutMs;
    if (ms !== undefined) this.#deadline = o.clock.setTimer(ms, () => this.#timedOut(ms));
  }

  #timedOut(ms: number): void {
    this.#deadline = undefined;
    if (this.#settled) return;
    // Settled first: the abort reports an error of its own, which would be taken for the outcome.
    this.#done({ kind: 'timeout', message: `no response within the route's timeout (${ms} ms)` });
    this.#controller?.abort(new Error(`no response within the route's ${ms} ms`));
  }

  /**
   * The response closed: the client went away, or (before the attempt settled) the listener answered
   * itself, e.g. a 408 for an upload that went idle. Either way this attempt is over.
   */
  readonly #onClientClose = (): void => {
    if (this.#settled && (this.#mode !== 'forward' || this.#res.writableFinished)) return;
    this.#controller?.abort(new Error('client went away'));
    this.#done({ kind: 'client_gone' });
    this.#finished();
  };

  /** The forwarded response is over (complete or cut): tell the spec once. */
  readonly #finished = (): void => {
    if (this.#mode !== 'forward') return;
    this.#mode = 'finished';
    if (this.#onDrain) this.#res.off('drain', this.#onDrain);
    this.#stalled?.cancel();
    this.#spec.finished();
  };

  /**
   * The client reads again after backpressure. Made on the first backpressure only: most responses
   * never meet any, and a listener per response would be garbage per response.
   */
  #onDrain: (() => void) | undefined;

  #waitForDrain(controller: Dispatcher.DispatchController): void {
    controller.pause();
    this.#onDrain ??= (): void => {
      this.#stalled?.cancel();
      this.#stalled = undefined;
      this.#controller?.resume();
    };
    if (!this.#stalled) this.#res.once('drain', this.#onDrain);
    this.#stalled ??= this.#o.clock.setTimer(this.#o.idleTimeoutMs, () => {
      this.#controller?.abort(new Error(`client read nothing for ${this.#o.idleTimeoutMs} ms`));
      this.#res.destroy();
      this.#finished();
    });
  }

  #done(r: AttemptResult): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#deadline?.cancel();
    if (r.kind !== 'response') this.#res.off('close', this.#onClientClose);
    this.#spec.settled(r);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    this.#started = true;
    if (this.#settled) {
      controller.abort(new Error('client went away'));
      return;
    }
    this.#spec.onConnected();
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    // An interim response (102, 103 Early Hints) is not the answer: written as one, it took the
    // place of the final response, which was then lost. It is dropped; the final one follows.
    if (this.#settled || status < 200) return;
    if (this.#spec.retryStatus(status)) {
      this.#mode = 'drain';
      this.#done({ kind: 'retry_status', status });
      return;
    }
    const res = this.#res;
    const out = stripHopByHop(headers);
    this.#spec.editResponse?.(out);
    // An answer before the whole request body (a 401 to an upload): the rest of the body is not
    // read, so this connection cannot carry another request (the listener closes it after).
    if (bodyUnread(res.req)) out.connection = 'close';
    try {
      res.writeHead(status, statusMessage, out);
    } catch {
      // An upstream header Node refuses to write (invalid characters): fail the response, not the process.
      this.#mode = 'forward';
      this.#done({ kind: 'response', status });
      controller.abort(new Error('response headers refused'));
      res.destroy();
      this.#finished();
      return;
    }
    this.#mode = 'forward';
    this.#done({ kind: 'response', status });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#mode === 'forward' && !this.#res.write(chunk)) this.#waitForDrain(controller);
  }

  onResponseEnd(_controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.#mode !== 'forward') return;
    const res = this.#res;
    for (const _ in trailers) {
      // Trailers exist only on a chunked response; Node writes them when the response is chunked.
      try {
        res.addTrailers(stripHopByHop(trailers));
      } catch {
        // invalid trailer characters: the body is complete, the trailers are dropped
      }
      break;
    }
    res.end(this.#finished);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    if (this.#mode === 'forward') {
      // The response was under way: all that is left is to cut it, so the client sees it incomplete.
      this.#res.destroy();
      this.#finished();
      return;
    }
    if (this.#mode !== 'none' || this.#settled) return;
    this.#done(this.#classify(err));
  }

  #classify(err: NodeJS.ErrnoException): AttemptResult {
    const code = err.code ?? '';
    const message = code || err.message || 'error';
    if (code === RESPONSE_TIMEOUT)
      return { kind: 'timeout', message: `no response within ${this.#o.responseTimeoutMs} ms` };
    if (!this.#started && CONNECT_ERRORS.has(code)) {
      const timedOut = code === 'UND_ERR_CONNECT_TIMEOUT';
      return {
        kind: 'connect_failure',
        timedOut,
        message: timedOut ? `${this.#o.connectTimeoutMs} ms` : message,
      };
    }
    // The request reached a connection that closed under it before any response: a server closing
    // an idle keep-alive connection as the request arrives, or an endpoint that died with requests
    // in flight. Whether the request was processed is unknown (the caller decides what to retry).
    // (undici gives a broken response, 'bad response' or 'bad upgrade', the same code as a close.)
    if (RESET_ERRORS.has(code) && !err.message.startsWith('bad '))
      return { kind: 'reset', message: `reset before any response (${message})` };
    return { kind: 'failed', message };
  }
}
