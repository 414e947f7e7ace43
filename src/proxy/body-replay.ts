import { PassThrough, type Readable } from 'node:stream';

/**
 * A request body as its attempts read it: each attempt gets a stream of its own, so the client's
 * request stream never goes to the upstream client itself (which would destroy it, and with it the
 * client's connection, when an attempt ends). With a `limit`, the body can also be sent again
 * after a failed connect: it streams to the current attempt as it arrives (no added latency)
 * while its first `limit` bytes are also kept; a new attempt gets a stream that replays them and
 * then follows the live body. Once an attempt has connected, nothing is kept any more (a retry is
 * only ever made after a failed connect). Bodies larger than the limit are not replayable:
 * Linkerd's rule, 64 KiB.
 */
export class BodyReplay {
  readonly #req: Readable;
  readonly #limit: number;
  #chunks: Buffer[] = [];
  #size = 0;
  #received = 0;
  #recording = true;
  #overflow = false;
  #ended = false;
  #discarded = false;
  #current: PassThrough | undefined;

  constructor(req: Readable, limit = 64 * 1024) {
    this.#req = req;
    this.#limit = limit;
    req.on('data', (chunk: Buffer) => {
      this.#received += chunk.length;
      if (this.#recording && !this.#overflow) {
        this.#size += chunk.length;
        this.#chunks.push(chunk);
        // Until the first attempt takes them, all bytes are kept whatever the limit: they have
        // nowhere else to go (and are one socket read at most: the attempt follows within a tick).
        if (this.#current) this.#checkLimit();
      }
      // An attempt that has ended (its upstream answered without reading everything) takes no more.
      const out = this.#current;
      if (out && !out.destroyed && !out.write(chunk)) this.#waitFor(out);
    });
    req.on('end', () => {
      this.#ended = true;
      this.#current?.end();
    });
  }

  /** Whether a new attempt can get the whole body. */
  get replayable(): boolean {
    return this.#recording && !this.#overflow;
  }

  /** Bytes of the body received so far. */
  get received(): number {
    return this.#received;
  }

  /** The body stream for a new attempt; the previous attempt's stream stops receiving. */
  attempt(): PassThrough {
    const s = new PassThrough();

    this.#current?.destroy();
    this.#current = s;
    for (const c of this.#chunks) s.write(c);
    this.#checkLimit();
    if (this.#ended) s.end();
    else if (this.#req.isPaused()) this.#req.resume();
    return s;
  }

  /** The current attempt reached its upstream: no retry will need the kept bytes. */
  connected(): void {
    this.#recording = false;
    this.#chunks = [];
  }

  /**
   * The exchange is over: no attempt takes the rest of the body. The client's stream is left
   * as it is; the listener reads what is left (or closes the connection).
   */
  discard(): void {
    this.#discarded = true;
    this.connected();
    const out = this.#current;
    this.#current = undefined;
    out?.destroy();
  }

  #checkLimit(): void {
    if (this.#size <= this.#limit) return;
    this.#overflow = true;
    this.#chunks = [];
  }

  /** Backpressure: the client's body waits until the attempt reads again, or is gone. */
  #waitFor(out: PassThrough): void {
    this.#req.pause();
    const go = (): void => {
      out.off('drain', go);
      out.off('close', go);
      if (!this.#discarded && this.#current === out) this.#req.resume();
    };
    out.on('drain', go);
    out.on('close', go);
  }
}
