import { PassThrough, type Readable } from 'node:stream';

/**
 * Lets a request body be sent again after a failed connect. The body streams to the current
 * attempt as it arrives (no added latency) while its first `limit` bytes are also kept; a new
 * attempt gets a stream that replays them and then follows the live body. Once an attempt has
 * connected, nothing is kept any more (a retry is only ever made after a failed connect). Bodies
 * larger than the limit are not replayable: Linkerd's rule, 64 KiB.
 */
export class BodyReplay {
  readonly #req: Readable;
  readonly #limit: number;
  #chunks: Buffer[] = [];
  #size = 0;
  #recording = true;
  #overflow = false;
  #ended = false;
  #current: PassThrough | undefined;

  constructor(req: Readable, limit = 64 * 1024) {
    this.#req = req;
    this.#limit = limit;
    req.on('data', (chunk: Buffer) => {
      if (this.#recording && !this.#overflow) {
        this.#size += chunk.length;
        if (this.#size > this.#limit) {
          this.#overflow = true;
          this.#chunks = [];
        } else this.#chunks.push(chunk);
      }
      const out = this.#current;
      if (out && !out.write(chunk)) {
        req.pause();
        out.once('drain', () => req.resume());
      }
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

  /** The body stream for a new attempt; the previous attempt's stream stops receiving. */
  attempt(): PassThrough {
    const s = new PassThrough();
    this.#current?.destroy();
    this.#current = s;
    for (const c of this.#chunks) s.write(c);
    if (this.#ended) s.end();
    else if (this.#req.isPaused()) this.#req.resume();
    return s;
  }

  /** The current attempt reached its upstream: no retry will need the kept bytes. */
  connected(): void {
    this.#recording = false;
    this.#chunks = [];
  }
}
