import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Clock, Timer } from '../shared/clock.ts';
import type { StreamServer } from './h2/stream-server.ts';

/**
 * Telling HTTP from other protocols by a connection's first bytes, for listeners that carry both
 * (transparent capture, and TCP streams on the mesh port).
 *
 * What goes to the HTTP parser has its caller identity headers replaced; what is streamed as TCP
 * reaches the app untouched. So a stream any HTTP/1 parser could take as a request must go to ours:
 * a mistake that way costs a non-HTTP client a 400, a mistake the other way lets a caller hand the
 * app headers the sidecar should have set. Hence the request line is recognised loosely (any token
 * as method, any version after " HTTP/"), and leading empty lines are skipped as Node's parser
 * (llhttp) skips every CR and LF before the request line.
 */

/** The longest prefix looked at; an HTTP request line longer than this goes to the parser (431). */
export const SNIFF_LIMIT = 16 * 1024;
/** RFC 9113 section 3.4: every prior-knowledge HTTP/2 connection starts with these 24 octets. */
const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
/** method SP target SP HTTP/version, as loosely as any server parses it (RFC 9112 section 3). */
const REQUEST_LINE = new RegExp(`^${TOKEN}[ \\t]+\\S.*[ \\t]HTTP/`, 'i');
/** What a request line can still become while its end has not arrived. */
const REQUEST_LINE_START = new RegExp(`^${TOKEN}([ \\t].*)?$`, 's');
const LEADING_EMPTY_LINES = /^[\r\n]+/;

export type StreamKind = 'http' | 'h2' | 'tcp';

/**
 * HTTP/1, h2 or not, from a connection's first bytes. A complete first line must be a request
 * line, so text protocols such as Redis inline commands (`PING 42`) or SMTP are not mistaken for
 * HTTP. 'more' asks for more bytes; final (detect timeout or limit) forces an answer, and then an
 * unfinished line that could still become a request line is HTTP.
 */
export function classify(buf: Buffer, final: boolean): StreamKind | 'more' {
  const preface = prefaceOf(buf);
  if (preface === 'h2') return 'h2';
  if (preface === 'more' && !final) return 'more';
  const all = buf.subarray(0, SNIFF_LIMIT).toString('latin1');
  const text = all.replace(LEADING_EMPTY_LINES, '');
  const atLimit = final || buf.length >= SNIFF_LIMIT;
  // Silence is a server-speaks-first protocol; empty lines alone may still precede a request.
  if (text.length === 0) return all.length === 0 ? (final ? 'tcp' : 'more') : atLimit ? 'http' : 'more';
  const eol = text.search(/[\r\n]/);
  if (eol >= 0) return REQUEST_LINE.test(text.slice(0, eol)) ? 'http' : 'tcp';
  if (!REQUEST_LINE_START.test(text)) return 'tcp';
  return atLimit ? 'http' : 'more';
}

/** 'h2' once buf holds the whole h2c preface, 'more' while it is a prefix of it (or empty), else 'no'. */
export function prefaceOf(buf: Buffer): 'h2' | 'more' | 'no' {
  const n = Math.min(buf.length, H2_PREFACE.length);
  if (!buf.subarray(0, n).equals(H2_PREFACE.subarray(0, n))) return 'no';
  return n === H2_PREFACE.length ? 'h2' : 'more';
}

/**
 * Reads a tunnel's first bytes (after head, those already read) until they are the h2c preface
 * ('h2') or cannot be ('other': a TLS record starts 0x16, so gRPC over TLS is 'other' at its first
 * byte). A client silent for waitMs is 'other' too: a server-speaks-first protocol must still get
 * its stream. 'closed' when the client left first. The socket is left paused; the bytes are returned.
 */
export function h2PrefaceOrNot(
  socket: Socket,
  head: Buffer,
  clock: Clock,
  waitMs: number,
): Promise<{ kind: 'h2' | 'other' | 'closed'; head: Buffer }> {
  const kindOf = (p: 'h2' | 'no'): 'h2' | 'other' => (p === 'h2' ? 'h2' : 'other');
  const known = prefaceOf(head);
  if (known !== 'more') return Promise.resolve({ kind: kindOf(known), head });
  if (socket.destroyed) return Promise.resolve({ kind: 'closed', head });
  return new Promise((resolve) => {
    let got = head;
    const finish = (kind: 'h2' | 'other' | 'closed'): void => {
      timer.cancel();
      socket.off('data', onData).off('close', onClose).pause();
      resolve({ kind, head: got });
    };
    const onData = (d: Buffer): void => {
      got = Buffer.concat([got, d]);
      const p = prefaceOf(got);
      if (p !== 'more') finish(kindOf(p));
    };
    const onClose = (): void => finish('closed');
    const timer = clock.setTimer(waitMs, () => finish('other'));
    socket.on('data', onData).once('close', onClose).resume();
  });
}

/**
 * Takes back a stream that was handed over as TCP before its client said anything, once the
 * client's first bytes turn out to be HTTP (see firstWords); head holds those bytes.
 */
export type Reclaim = (head: Buffer) => void;

export interface Detected {
  http: Server;
  h2?: StreamServer;
  /** reclaim is given when the client said nothing yet: its first bytes must still be checked. */
  tcp: (socket: Socket, reclaim?: Reclaim) => void;
}

/**
 * Reads a connection's first bytes until classify decides (or timeoutMs passes, which a silent
 * client does), then hands the connection over with those bytes put back: to the HTTP server,
 * the h2 server, or `tcp`, which gets it paused so no byte is lost while its route is decided.
 */
export function detect(socket: Socket, clock: Clock, timeoutMs: number, to: Detected): void {
  const chunks: Buffer[] = [];
  let decided = false;
  const decide = (kind: StreamKind): void => {
    if (decided) return;
    decided = true;
    timer.cancel();
    socket.off('data', onData);
    const reclaim = chunks.length === 0 ? reclaimTo(socket, to) : undefined;
    handOver(socket, to, kind, Buffer.concat(chunks), reclaim);
  };
  const timer = clock.setTimer(timeoutMs, () => {
    const c = classify(Buffer.concat(chunks), true);
    decide(c === 'more' ? 'tcp' : c);
  });
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk);
    const c = classify(Buffer.concat(chunks), false);
    if (c !== 'more') decide(c);
  };
  socket.on('data', onData);
  // A client gone before it was classified is nobody's: the app is not dialled for it.
  socket.once('close', () => {
    decided = true;
    timer.cancel();
  });
}

/**
 * Hands a stream to `tcp` before its client said anything, its first bytes still to be checked
 * (firstWords): for streams that are TCP unless they turn out to be HTTP, so that an app that
 * speaks first is not kept waiting for a detection timeout.
 */
export function tcpUnlessHttp(socket: Socket, to: Detected): void {
  to.tcp(socket, reclaimTo(socket, to));
}

function handOver(socket: Socket, to: Detected, kind: StreamKind, head: Buffer, reclaim?: Reclaim): void {
  socket.pause();
  if (kind === 'h2' && to.h2) return to.h2.serve(socket, head);
  if (head.length > 0) socket.unshift(head);
  if (kind === 'http') {
    to.http.emit('connection', socket);
    socket.resume();
  } else to.tcp(socket, reclaim);
}

const reclaimTo =
  (socket: Socket, to: Detected): Reclaim =>
  (head) =>
    handOver(socket, to, classify(head, true) === 'h2' ? 'h2' : 'http', head);

/** How long firstWords waits for the rest of a first line that could still be a request line. */
export const FIRST_LINE_WAIT_MS = 1_000;

/**
 * A silent client's stream once the app is connected: a server-speaks-first app greets, and the
 * stream is the app's ('tcp'). A client that speaks first instead is classified like any other
 * (an unfinished first line gets FIRST_LINE_WAIT_MS to finish): an HTTP request goes back to the
 * parser ('http', with its bytes), since streaming it would let the client write the app headers
 * the sidecar sets (an HTTP server never speaks first, so nothing was lost). Either socket closing
 * or falling idle ends both ('closed'). Both are left paused; the app's greeting has been passed
 * on, the client's bytes are returned.
 */
export function firstWords(
  client: Socket,
  app: Socket,
  idleMs: number,
  clock: Clock,
): Promise<{ kind: 'tcp' | 'http' | 'closed'; head: Buffer }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let wait: Timer | undefined;
    const finish = (kind: 'tcp' | 'http' | 'closed'): void => {
      wait?.cancel();
      client.off('data', fromClient).off('close', closed).setTimeout(0, closed).pause();
      app.off('data', fromApp).off('close', closed).off('error', closed).pause();
      if (kind === 'closed') {
        client.destroy();
        app.destroy();
      }
      resolve({ kind, head: Buffer.concat(chunks) });
    };
    const decide = (c: StreamKind): void => finish(c === 'tcp' ? 'tcp' : 'http');
    const fromApp = (d: Buffer): void => {
      client.write(d);
      finish('tcp');
    };
    const fromClient = (d: Buffer): void => {
      chunks.push(d);
      const c = classify(Buffer.concat(chunks), false);
      if (c !== 'more') return decide(c);
      wait ??= clock.setTimer(FIRST_LINE_WAIT_MS, () => {
        const last = classify(Buffer.concat(chunks), true);
        decide(last === 'more' ? 'tcp' : last);
      });
    };
    const closed = (): void => finish('closed');
    if (client.destroyed || app.destroyed) return closed();
    client.on('data', fromClient).once('close', closed).setTimeout(idleMs, closed).resume();
    app.on('data', fromApp).once('close', closed).on('error', closed).resume();
  });
}
