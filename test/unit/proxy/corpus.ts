/**
 * Malformed and smuggling-shaped requests (many from Node's HTTP parser CVEs). Each must get a 4xx
 * and a closed connection, and the process must stay up. `ingress` is
 * the answer on the ingress listener where it differs ('close': a close without an answer).
 */
export interface MalformedCase {
  name: string;
  data: string;
  status: number;
  ingress?: number | 'close';
}

const H = 'Host: web.prod\r\n';
const WS = 'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n';
export const corpus: MalformedCase[] = [
  {
    name: 'CL and TE together',
    data: `POST / HTTP/1.1\r\n${H}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    status: 400,
  },
  {
    name: 'differing duplicate Content-Length',
    data: `POST / HTTP/1.1\r\n${H}Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcde`,
    status: 400,
  },
  {
    name: 'identical duplicate Content-Length',
    data: `POST / HTTP/1.1\r\n${H}Content-Length: 4\r\nContent-Length: 4\r\n\r\nabcd`,
    status: 400,
  },
  {
    name: 'TE whose final coding is not chunked',
    data: `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n`,
    status: 400,
  },
  {
    name: 'duplicate TE chunked',
    data: `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    status: 400,
  },
  { name: 'space before colon', data: `GET / HTTP/1.1\r\nHost : web.prod\r\n\r\n`, status: 400 },
  {
    name: 'space inside Content-Length',
    data: `POST / HTTP/1.1\r\n${H}Content-Length: 1 0\r\n\r\n0123456789`,
    status: 400,
  },
  {
    name: 'signed Content-Length',
    data: `POST / HTTP/1.1\r\n${H}Content-Length: +4\r\n\r\nabcd`,
    status: 400,
  },
  { name: 'obs-fold continuation line', data: `GET / HTTP/1.1\r\n${H}X-A: b\r\n c\r\n\r\n`, status: 400 },
  { name: 'bare CR in a header value', data: `GET / HTTP/1.1\r\n${H}X-A: b\rc\r\n\r\n`, status: 400 },
  { name: 'header end \\r\\n\\rX (CVE-2025-23167)', data: `GET / HTTP/1.1\r\n${H}\r\n\rX`, status: 400 },
  { name: 'invalid header name character', data: `GET / HTTP/1.1\r\n${H}X(A): b\r\n\r\n`, status: 400 },
  { name: 'NUL in header value', data: `GET / HTTP/1.1\r\n${H}X-A: b\u0000c\r\n\r\n`, status: 400 },
  { name: 'missing Host on HTTP/1.1', data: `GET / HTTP/1.1\r\n\r\n`, status: 400 },
  { name: 'repeated Host', data: `GET / HTTP/1.1\r\n${H}Host: other\r\n\r\n`, status: 400 },
  {
    name: 'invalid chunk size',
    data: `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n`,
    status: 400,
  },
  {
    name: 'TLS ClientHello on a plain port',
    data: '\u0016\u0003\u0001\u0002\u0000\u0001\u0000\u0001\u00fc\u0003\u0003',
    status: 400,
  },
  { name: 'garbage request line', data: `HELLO\r\n\r\n`, status: 400 },
  { name: 'unknown HTTP version', data: `GET / HTTP/9.1\r\n${H}\r\n`, status: 400 },
  {
    // Ingress rewrites any absolute-form target to origin-form; only egress would have to dial it.
    name: 'https absolute-form to a plain proxy',
    data: `GET https://web.prod/ HTTP/1.1\r\n${H}Connection: close\r\n\r\n`,
    status: 400,
    ingress: 200,
  },
  { name: 'absolute-form with a malformed host', data: `GET http://[zz/ HTTP/1.1\r\n${H}\r\n`, status: 400 },
  {
    name: 'WebSocket upgrade with a repeated Host',
    data: `GET / HTTP/1.1\r\n${H}Host: other\r\n${WS}Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
    status: 400,
  },
  {
    name: 'WebSocket upgrade without Host',
    data: `GET / HTTP/1.1\r\n${WS}Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
    status: 400,
  },
  {
    // Ingress serves no CONNECT: Node closes the connection.
    name: 'CONNECT with a repeated Host',
    data: `CONNECT web.prod:80 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n`,
    status: 400,
    ingress: 'close',
  },
  {
    name: 'CONNECT without a port',
    data: `CONNECT web.prod HTTP/1.1\r\n${H}\r\n`,
    status: 400,
    ingress: 'close',
  },
  { name: 'relative request target', data: `GET foo HTTP/1.1\r\n${H}\r\n`, status: 400 },
  {
    name: 'oversized headers',
    data: `GET / HTTP/1.1\r\n${H}X-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    status: 431,
  },
  {
    name: 'too many headers',
    data: `GET / HTTP/1.1\r\n${H}${Array.from({ length: 120 }, (_, i) => `X-H${i}: v\r\n`).join('')}\r\n`,
    status: 431,
  },
];

/** An identity nobody may claim for themselves: only a sidecar vouches for a caller. */
export const FORGED_IDENTITY = 'URI=spiffe://cluster.local/ns/kube-system/sa/admin';

/**
 * Requests that carry a forged caller identity in shapes a sniffer could take for another
 * protocol, while HTTP parsers (Node's among them) read them as requests. Whatever path they take
 * (plaintext ingress, a TCP stream on the mesh port, a CONNECT tunnel), the app must see the
 * sidecar's x-forwarded-client-cert or none, or the request must be refused.
 */
export interface ForgedIdentityCase {
  name: string;
  data: string;
}

const forged = (requestLine: string, before = ''): string =>
  `${before}${requestLine}\r\nHost: web.prod\r\nX-Forwarded-Client-Cert: ${FORGED_IDENTITY}\r\nConnection: close\r\n\r\n`;

export const forgedIdentityCorpus: ForgedIdentityCase[] = [
  { name: 'plain request', data: forged('GET /admin HTTP/1.1') },
  { name: 'leading CRLF', data: forged('GET /admin HTTP/1.1', '\r\n') },
  { name: 'leading LF', data: forged('GET /admin HTTP/1.1', '\n') },
  { name: 'leading bare CR', data: forged('GET /admin HTTP/1.1', '\r') },
  { name: 'mixed leading CR and LF', data: forged('GET /admin HTTP/1.1', '\r\r\n\n\r\n') },
  { name: '2,000 leading CRLFs', data: forged('GET /admin HTTP/1.1', '\r\n'.repeat(2_000)) },
  { name: 'method with a hyphen (M-SEARCH)', data: forged('M-SEARCH /admin HTTP/1.1') },
  { name: 'method longer than 12 characters', data: forged('VERSION-CONTROL /admin HTTP/1.1') },
  { name: 'two spaces after the method', data: forged('GET  /admin HTTP/1.1') },
  { name: 'version HTTP/0.9', data: forged('GET /admin HTTP/0.9') },
  { name: 'version HTTP/2.0 on an HTTP/1 connection', data: forged('GET /admin HTTP/2.0') },
  {
    name: 'identity header twice',
    data: forged('GET /admin HTTP/1.1').replace(
      '\r\n\r\n',
      `\r\nx-forwarded-client-cert: ${FORGED_IDENTITY}\r\n\r\n`,
    ),
  },
];
