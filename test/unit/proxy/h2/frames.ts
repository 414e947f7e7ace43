import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * HTTP/2 at the frame level, for what node:http2 will not do on purpose: a client that opens
 * more streams than the peer allows or sends a header list larger than advertised, and a server
 * that resets a stream with NO_ERROR before END_STREAM. Header blocks are written as HPACK
 * literals without indexing or Huffman coding (RFC 7541 section 6.2.2), which every decoder takes;
 * received header blocks are not decoded.
 */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const Flag = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;

/** SETTINGS identifiers (RFC 9113 section 6.5.2). */
export const Setting = { MAX_CONCURRENT_STREAMS: 0x3, MAX_HEADER_LIST_SIZE: 0x6 } as const;

export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

export function frame(
  type: number,
  flags: number,
  stream: number,
  payload: Buffer = Buffer.alloc(0),
): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** RFC 7541 section 5.1 integer with a 7-bit prefix (string lengths, Huffman bit clear). */
function int7(n: number): Buffer {
  if (n < 127) return Buffer.from([n]);
  const out = [127];
  let rest = n - 127;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return Buffer.from(out);
}

export function hpack(headers: [string, string][]): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of headers) {
    const n = Buffer.from(name, 'latin1');
    const v = Buffer.from(value, 'latin1');
    parts.push(Buffer.from([0]), int7(n.length), n, int7(v.length), v);
  }
  return Buffer.concat(parts);
}

/** A HEADERS frame, followed by CONTINUATION frames when the block is larger than one frame. */
export function headersFrames(stream: number, headers: [string, string][], endStream: boolean): Buffer {
  const block = hpack(headers);
  const max = 16_384;
  const out: Buffer[] = [];
  for (let at = 0; at === 0 || at < block.length; at += max) {
    const chunk = block.subarray(at, at + max);
    const last = at + max >= block.length;
    const type = at === 0 ? FrameType.HEADERS : FrameType.CONTINUATION;
    const flags = (last ? Flag.END_HEADERS : 0) | (at === 0 && endStream ? Flag.END_STREAM : 0);
    out.push(frame(type, flags, stream, chunk));
  }
  return Buffer.concat(out);
}

export function rstFrame(stream: number, code: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(code);
  return frame(FrameType.RST_STREAM, 0, stream, p);
}

export function settingsOf(f: Frame): Map<number, number> {
  const out = new Map<number, number>();
  for (let at = 0; at + 6 <= f.payload.length; at += 6)
    out.set(f.payload.readUInt16BE(at), f.payload.readUInt32BE(at + 2));
  return out;
}

export const errorCodeOf = (f: Frame): number =>
  f.type === FrameType.GOAWAY ? f.payload.readUInt32BE(4) : f.payload.readUInt32BE(0);

/** One side of a raw HTTP/2 connection: frames received so far, and waiting on them (bounded). */
export class FrameConn {
  readonly socket: Socket;
  readonly frames: Frame[] = [];
  closed = false;
  #buf = Buffer.alloc(0);
  #waiters = new Set<() => void>();

  constructor(socket: Socket, skip = 0) {
    this.socket = socket;
    let preface = skip;
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, chunk]);
      if (preface > 0) {
        if (this.#buf.length < preface) return;
        this.#buf = this.#buf.subarray(preface);
        preface = 0;
      }
      while (this.#buf.length >= 9) {
        const len = this.#buf.readUIntBE(0, 3);
        if (this.#buf.length < 9 + len) break;
        const f: Frame = {
          type: this.#buf[3] as number,
          flags: this.#buf[4] as number,
          stream: this.#buf.readUInt32BE(5) & 0x7fffffff,
          payload: this.#buf.subarray(9, 9 + len),
        };
        this.#buf = this.#buf.subarray(9 + len);
        this.#onFrame(f);
      }
      this.#wake();
    });
    socket.on('close', () => {
      this.closed = true;
      this.#wake();
    });
  }

  /** Frames handled here: SETTINGS and PING are acknowledged, as every peer must. */
  #onFrame(f: Frame): void {
    this.frames.push(f);
    if (f.type === FrameType.SETTINGS && !(f.flags & Flag.ACK))
      this.write(frame(FrameType.SETTINGS, Flag.ACK, 0));
    if (f.type === FrameType.PING && !(f.flags & Flag.ACK))
      this.write(frame(FrameType.PING, Flag.ACK, 0, f.payload));
    this.onFrame?.(f);
  }

  onFrame?: (f: Frame) => void;

  write(b: Buffer): void {
    if (!this.socket.destroyed) this.socket.write(b);
  }

  #wake(): void {
    for (const w of this.#waiters) w();
  }

  /** Resolves with the first frame that matches, or undefined when the connection closed or ms passed. */
  waitFor(match: (f: Frame) => boolean, ms = 10_000): Promise<Frame | undefined> {
    return this.until(() => this.frames.find(match), ms);
  }

  /** Resolves when the connection has closed (true) or ms passed (false). */
  waitClosed(ms = 10_000): Promise<boolean> {
    return this.until(() => (this.closed ? true : undefined), ms).then((v) => v === true);
  }

  until<T>(check: () => T | undefined, ms: number): Promise<T | undefined> {
    return new Promise((resolve) => {
      const done = (v: T | undefined): void => {
        clearTimeout(timer);
        this.#waiters.delete(poll);
        resolve(v);
      };
      const poll = (): void => {
        const v = check();
        if (v !== undefined || this.closed) done(v);
      };
      const timer = setTimeout(() => done(undefined), ms);
      this.#waiters.add(poll);
      poll();
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

/**
 * A client connection: preface and empty SETTINGS sent (with first, in the same write), the
 * server's SETTINGS acknowledged when they come.
 */
export function rawClient(port: number, first: Buffer = Buffer.alloc(0)): Promise<FrameConn> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0), first]));
      resolve(new FrameConn(socket));
    });
    socket.once('error', reject);
  });
}

export interface RawServer {
  port: number;
  server: Server;
  close(): void;
}

/**
 * A server answering at the frame level: onRequest gets each stream that sent its request
 * headers. Its own SETTINGS are empty (the defaults).
 */
export async function rawServer(onRequest: (conn: FrameConn, stream: number) => void): Promise<RawServer> {
  const conns = new Set<Socket>();
  const server = createServer((socket) => {
    conns.add(socket);
    socket.once('close', () => conns.delete(socket));
    const conn = new FrameConn(socket, PREFACE.length);
    conn.write(frame(FrameType.SETTINGS, 0, 0));
    conn.onFrame = (f) => {
      if (f.type === FrameType.HEADERS || f.type === FrameType.CONTINUATION)
        if (f.flags & Flag.END_HEADERS) onRequest(conn, f.stream);
    };
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    server,
    close: () => {
      for (const s of conns) s.destroy();
      server.close();
    },
  };
}

export function dataFrame(stream: number, body: string | Buffer, endStream: boolean): Buffer {
  return frame(FrameType.DATA, endStream ? Flag.END_STREAM : 0, stream, Buffer.from(body));
}
