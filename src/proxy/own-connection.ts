import type { ClientRequest, IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { request } from '../shared/node-http.ts';
import type { Socket } from 'node:net';
import type { Dispatcher } from 'undici';
import type { Timer } from '../shared/clock.ts';
import type { Dial } from './dial.ts';
import { RESPONSE_TIMEOUT, type ResponseWriter } from './response-writer.ts';
import type { AttemptSpec, Endpoint, UpstreamClientOptions } from './upstream-client.ts';

/**
 * How long an upstream that answers an Expect: 100-continue with neither a 100 nor a final status
 * is waited for before the body is sent anyway (RFC 9110 section 10.1.1 lets a client stop
 * waiting; curl waits 1 s).
 */
export const CONTINUE_WAIT_MS = 1_000;

/**
 * One attempt on a connection of its own, through node:http, for the requests undici cannot send
 * as the client sent them. `Expect: 100-continue` goes upstream and the body waits: the upstream's
 * 100 is relayed to the client (whose body then follows), and a final answer instead (a 401)
 * means the body is never sent. An empty chunked body goes chunked. The attempt drives the same
 * ResponseWriter as an undici dispatch, through the same callbacks, and is its controller; the
 * connection is closed after the exchange (these requests are too rare to pool for).
 */
export class OwnConnection implements Dispatcher.DispatchController {
  readonly #up: Endpoint;
  readonly #spec: AttemptSpec;
  readonly #handler: ResponseWriter;
  readonly #dial: Dial;
  readonly #o: UpstreamClientOptions;
  #socket: Socket | undefined;
  #req: ClientRequest | undefined;
  #res: IncomingMessage | undefined;
  /** The wait for a 100, then the response timeout. */
  #timer: Timer | undefined;
  #bodySent = false;
  /** No callback reaches the handler any more: the exchange ended, failed or was aborted. */
  #over = false;
  #aborted = false;
  #paused = false;
  #reason: Error | null = null;

  constructor(
    up: Endpoint,
    spec: AttemptSpec,
    handler: ResponseWriter,
    dial: Dial,
    o: UpstreamClientOptions,
  ) {
    this.#up = up;
    this.#spec = spec;
    this.#handler = handler;
    this.#dial = dial;
    this.#o = o;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  get paused(): boolean {
    return this.#paused;
  }

  get reason(): Error | null {
    return this.#reason;
  }

  start(): void {
    this.#dial(
      this.#up.host,
      this.#up.port,
      (err, socket) => this.#connected(err, socket),
      this.#up.namespace,
      this.#up.meshed,
    );
  }

  abort(reason: Error): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#close();
  }

  pause(): void {
    this.#paused = true;
    this.#res?.pause();
  }

  resume(): void {
    this.#paused = false;
    this.#res?.resume();
  }

  #connected(err: Error | null, socket?: Socket): void {
    if (this.#over) return void socket?.destroy();
    if (err || !socket) {
      this.#over = true;
      return this.#handler.onResponseError(this, err ?? new Error('dial gave no socket'));
    }
    this.#socket = socket;
    // Aborts at once an attempt whose client has already gone.
    this.#handler.onRequestStart(this);
    if (!this.#over) this.#send(socket);
  }

  #send(socket: Socket): void {
    const spec = this.#spec;
    const headers: OutgoingHttpHeaders = { ...spec.headers };
    if (spec.expectContinue) headers.expect = '100-continue';
    if (spec.chunked) headers['transfer-encoding'] = 'chunked';
    const req = request({ method: spec.method, path: spec.path, headers, createConnection: () => socket });
    this.#req = req;
    req.on('continue', this.#continue);
    req.on('response', this.#response);
    req.on('error', this.#fail);
    req.on('finish', this.#sent);
    if (!spec.expectContinue) return this.#sendBody(req);
    req.flushHeaders();
    this.#timer = this.#o.clock.setTimer(CONTINUE_WAIT_MS, this.#continue);
  }

  /** The upstream said 100 Continue, or nothing for CONTINUE_WAIT_MS: the body may go. */
  readonly #continue = (): void => {
    const req = this.#req;
    if (this.#bodySent || this.#over || this.#res || !req) return;
    this.#spec.onContinue();
    this.#sendBody(req);
  };

  #sendBody(req: ClientRequest): void {
    this.#bodySent = true;
    this.#timer?.cancel();
    const body = this.#spec.body;
    if (body) body.pipe(req);
    else req.end();
  }

  /** The whole request is written: the response timeout runs from here, as undici's does. */
  readonly #sent = (): void => {
    if (this.#over || this.#res) return;
    const ms = this.#o.responseTimeoutMs;
    this.#timer = this.#o.clock.setTimer(ms, () =>
      this.#fail(Object.assign(new Error(`no response within ${ms} ms`), { code: RESPONSE_TIMEOUT })),
    );
  };

  readonly #response = (res: IncomingMessage): void => {
    if (this.#over) return;
    this.#res = res;
    // A final answer before the body was asked for: the body is never sent.
    this.#bodySent = true;
    this.#timer?.cancel();
    res.on('data', this.#data);
    res.on('end', this.#end);
    res.on('error', this.#fail);
    // A body that stops flowing is cut, as undici's body timeout does.
    this.#socket?.setTimeout(this.#o.idleTimeoutMs, this.#stalled);
    this.#handler.onResponseStart(this, res.statusCode ?? 0, res.headers, res.statusMessage);
  };

  readonly #data = (chunk: Buffer): void => {
    if (!this.#over) this.#handler.onResponseData(this, chunk);
  };

  readonly #end = (): void => {
    if (this.#over) return;
    this.#close();
    this.#handler.onResponseEnd(this, this.#res?.trailers ?? {});
  };

  readonly #stalled = (): void =>
    this.#fail(new Error(`response body stalled for ${this.#o.idleTimeoutMs} ms`));

  readonly #fail = (err: Error): void => {
    if (this.#over) return;
    this.#close();
    this.#handler.onResponseError(this, err);
  };

  #close(): void {
    this.#over = true;
    this.#timer?.cancel();
    if (this.#req) this.#spec.body?.unpipe(this.#req);
    this.#socket?.destroy();
  }
}
