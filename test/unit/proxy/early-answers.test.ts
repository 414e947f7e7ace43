import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net';
import { ep, service } from '../routing/fixtures.ts';
import { closedPort, startBackend, startProxy, startRecorder, type Backend, type Proxy } from './harness.ts';

/**
 * Answers given before the request body was read whole: the proxy's own 502 to an upload, and an
 * app's 401 to an upload it never reads. The client gets that answer (never a 502 made of the
 * app's close), its connection is closed after it (Connection: close, then a bounded lingering
 * read of what the client still sends), and an upload is never left blocked. Expect:
 * 100-continue goes to the app, so an app that refuses keeps the client from sending the body.
 */
const MiB = 1024 * 1024;
/** Generous: well above the linger time, far below the keep-alive timeout a stuck connection meets. */
const DEADLINE_MS = 12_000;

let dead: number;
let refusing: Backend;
let proxy: Proxy;
let tight: Proxy;
let ingressToDead: Proxy;
let ingressToRefusing: Proxy;

before(async () => {
  dead = await closedPort();
  refusing = await startBackend((_req, res) => {
    res.writeHead(401, { connection: 'close', 'content-length': '6' });
    res.end('denied');
  });
  // A keep-alive timeout far above the deadline: a connection left waiting for its next request fails.
  const config = { idleTimeoutMs: 60_000 };
  proxy = await startProxy(config);
  tight = await startProxy(config, { limits: { lingerBytes: 256 * 1024 } });
  for (const p of [proxy, tight]) {
    p.resolver.set(service('prod', 'dead', { eps: { http: [ep('127.0.0.1', dead)] } }));
    p.resolver.set(service('prod', 'refusing', { eps: { http: [ep('127.0.0.1', refusing.port)] } }));
  }
  ingressToDead = await startProxy({ ...config, appPorts: [dead] });
  ingressToRefusing = await startProxy({ ...config, appPorts: [refusing.port] });
});

after(async () => {
  for (const p of [proxy, tight, ingressToDead, ingressToRefusing]) await p.close();
  await refusing.close();
});

interface Upload {
  /** Everything the proxy sent back, as latin1. */
  reply: string;
  /** Every byte of the body was taken by the proxy's socket (a write that errors counts as not blocked). */
  uploadSettled: boolean;
  /** The second request was answered (the connection was kept and drained). */
  answeredAgain: boolean;
  /** The proxy closed the connection (its FIN, or a reset). */
  closed: boolean;
  error?: string;
}

/**
 * A keep-alive POST of `size` bytes on a raw socket, then (once the upload is written and the
 * first answer is in) a second request on the same connection. Resolves when the second request
 * is answered, when the proxy closes the connection, or at the deadline.
 */
function uploadThenAsk(port: number, host: string, size: number): Promise<Upload> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    const out: Upload = { reply: '', uploadSettled: false, answeredAgain: false, closed: false };
    let asked = false;
    const finish = (): void => {
      clearTimeout(deadline);
      s.destroy();
      resolve(out);
    };
    /** Done once the upload has settled and the second request was answered or refused by a close. */
    const check = (): void => {
      if (out.uploadSettled && (out.closed || out.answeredAgain)) finish();
    };
    const deadline = setTimeout(finish, DEADLINE_MS);
    const askAgain = (): void => {
      if (asked || !out.uploadSettled || !firstAnswerIn(out.reply) || s.destroyed) return;
      asked = true;
      s.write(`GET /second HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    };
    s.setEncoding('latin1');
    s.on('data', (c: string) => {
      out.reply += c;
      askAgain();
      const first = answerLength(out.reply);
      if (asked && first > 0 && answerLength(out.reply.slice(first)) > 0) {
        out.answeredAgain = true;
        check();
      }
    });
    s.on('error', (e: NodeJS.ErrnoException) => (out.error ??= e.code ?? e.message));
    // The proxy's FIN: it will send nothing more on this connection (a client that reads
    // Connection: close would not send the second request at all).
    s.on('end', () => {
      out.closed = true;
      check();
    });
    s.on('close', () => {
      out.closed = true;
      finish();
    });
    s.write(`POST /upload HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${size}\r\n\r\n`);
    const chunk = Buffer.alloc(64 * 1024, 'u');
    let sent = 0;
    const pump = (): void => {
      while (sent < size && !s.destroyed) {
        sent += chunk.length;
        const last = sent >= size;
        const ok = s.write(chunk, () => {
          if (last) {
            out.uploadSettled = true;
            askAgain();
            check();
          }
        });
        if (!ok) return void s.once('drain', pump);
      }
    };
    pump();
    // A write that fails never calls back with success: an error settles the upload too.
    s.on('error', () => {
      out.uploadSettled = true;
    });
  });
}

/** The length of the first whole response (head and Content-Length body) in reply; 0 if none yet. */
function answerLength(reply: string): number {
  const end = reply.indexOf('\r\n\r\n');
  if (end < 0) return 0;
  const length = /content-length: (\d+)/i.exec(reply.slice(0, end));
  const total = end + 4 + Number(length?.[1] ?? 0);
  return reply.length >= total ? total : 0;
}

const firstAnswerIn = (reply: string): boolean => answerLength(reply) > 0;

function assertAnsweredThenClosed(u: Upload, status: RegExp): void {
  const summary = JSON.stringify({ ...u, reply: u.reply.slice(0, 300) });
  assert.match(u.reply, status, summary);
  assert.ok(u.uploadSettled, `the upload was never taken whole, nor refused: ${summary}`);
  assert.ok(
    u.closed || u.answeredAgain,
    `the second request was neither answered nor refused by a close: ${summary}`,
  );
  const after = u.reply.slice(answerLength(u.reply));
  assert.ok(
    after === '' || /^HTTP\/1\.1 \d{3} /.test(after),
    `after the first answer: a whole answer or nothing: ${summary}`,
  );
}

describe('the proxy answers an upload before reading it (a refused endpoint)', () => {
  for (const size of [1 * MiB, 4 * MiB])
    test(`egress: ${size / MiB} MiB keep-alive upload: 502, then a clean close, never a stuck connection`, async () => {
      const u = await uploadThenAsk(proxy.egress, 'dead.prod', size);
      assertAnsweredThenClosed(u, /^HTTP\/1\.1 502 [^]*x-outrigger-error: upstream_failed/i);
      assert.match(u.reply.slice(0, u.reply.indexOf('\r\n\r\n')), /connection: close/i);
      assert.equal(u.error, undefined, 'closed with a FIN after the lingering read, not a reset');
    });

  test('ingress: 4 MiB keep-alive upload to an app that is down: 502, then a close', async () => {
    const u = await uploadThenAsk(ingressToDead.ingress, 'me', 4 * MiB);
    assertAnsweredThenClosed(u, /^HTTP\/1\.1 502 /);
  });

  test('a client that keeps sending past the linger limit still gets its 502, then the connection is closed', async () => {
    const u = await uploadThenAsk(tight.egress, 'dead.prod', 4 * MiB);
    assertAnsweredThenClosed(u, /^HTTP\/1\.1 502 /);
    // 256 KiB read and dropped, then the close: with the client still sending, a reset.
    assert.match(u.error ?? '', /^(EPIPE|ECONNRESET)$/, 'the lingering read stopped at its byte limit');
  });
});

/** A 2 MiB upload with Connection: close on a raw socket; resolves with the status line. */
function uploadOnce(port: number, host: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    let reply = '';
    const deadline = setTimeout(() => s.destroy(), DEADLINE_MS);
    s.setEncoding('latin1');
    s.on('data', (c: string) => (reply += c));
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(deadline);
      const head = reply.slice(0, reply.indexOf('\r\n\r\n'));
      resolve(`${head.split('\r\n')[0] ?? ''} ${/x-outrigger-error: .*/i.exec(head)?.[0] ?? ''}`.trim());
    });
    s.write(
      `POST /upload HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${2 * MiB}\r\nConnection: close\r\n\r\n`,
    );
    s.write(Buffer.alloc(2 * MiB, 'u'));
  });
}

describe('an app answers an upload without reading it (401 and Connection: close)', () => {
  for (const [listener, port, host] of [
    ['egress', () => proxy.egress, 'refusing.prod'],
    ['ingress', () => ingressToRefusing.ingress, 'me'],
  ] as const)
    test(`${listener}: 10 of 10 uploads get the app's 401, none a 502`, async () => {
      const statuses: string[] = [];
      for (let i = 0; i < 10; i++) statuses.push(await uploadOnce(port(), host));
      assert.deepEqual(
        statuses,
        Array.from({ length: 10 }, () => 'HTTP/1.1 401 Unauthorized'),
      );
    });
});

/** An HTTP server that answers Expect: 100-continue itself with `onExpect` (no automatic 100). */
async function expectServer(
  onExpect: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; port: number; heads: IncomingMessage['headers'][] }> {
  const heads: IncomingMessage['headers'][] = [];
  const server = createServer((_req, res) => res.end('no expectation'));
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    heads.push(req.headers);
    onExpect(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, heads };
}

/**
 * Sends a head with Expect: 100-continue and waits: the body goes only after a 100 Continue, as
 * curl does; resolves with everything received once the proxy closes (bounded).
 */
function expectUpload(port: number, host: string, body: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    let reply = '';
    let sent = false;
    const deadline = setTimeout(() => s.destroy(), DEADLINE_MS);
    s.setEncoding('latin1');
    s.on('data', (c: string) => {
      reply += c;
      if (!sent && reply.startsWith('HTTP/1.1 100 ')) {
        sent = true;
        s.write(body);
      }
    });
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(deadline);
      resolve(reply);
    });
    s.write(
      `PUT /expect HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${body.length}\r\n` +
        'Expect: 100-continue\r\nConnection: close\r\n\r\n',
    );
  });
}

describe('Expect: 100-continue is the app’s to answer', () => {
  test('an app that refuses with 401 and no 100: the client gets the 401 and never a 100', async () => {
    const app = await expectServer((_req, res) => {
      res.writeHead(401, { 'content-length': '6' });
      res.end('denied');
    });
    proxy.resolver.set(service('prod', 'expect401', { eps: { http: [ep('127.0.0.1', app.port)] } }));
    try {
      const reply = await expectUpload(proxy.egress, 'expect401.prod', 'b'.repeat(100_000));
      assert.match(reply, /^HTTP\/1\.1 401 /, JSON.stringify(reply.slice(0, 200)));
      assert.ok(!reply.includes('100 Continue'), JSON.stringify(reply.slice(0, 200)));
      assert.equal(app.heads[0]?.expect, '100-continue', 'the expectation reached the app');
    } finally {
      app.server.close();
    }
  });

  test('an app that accepts: its 100 reaches the client, then the whole body reaches the app', async () => {
    const app = await startRecorder();
    proxy.resolver.set(service('prod', 'expect200', { eps: { http: [ep('127.0.0.1', app.port)] } }));
    try {
      const reply = await expectUpload(proxy.egress, 'expect200.prod', 'c'.repeat(100_000));
      assert.match(
        reply,
        /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /,
        JSON.stringify(reply.slice(0, 200)),
      );
      assert.equal(app.got.length, 1);
      assert.equal(app.got[0]?.body, 'c'.repeat(100_000));
      assert.equal(app.hits[0]?.headers.expect, '100-continue');
    } finally {
      await app.close();
    }
  });

  test('ingress: an app that refuses: 401, no 100', async () => {
    const app = await expectServer((_req, res) => {
      res.writeHead(401, { 'content-length': '6' });
      res.end('denied');
    });
    const p = await startProxy({ appPorts: [app.port] });
    try {
      const reply = await expectUpload(p.ingress, 'me', 'd'.repeat(100_000));
      assert.match(reply, /^HTTP\/1\.1 401 /, JSON.stringify(reply.slice(0, 200)));
      assert.ok(!reply.includes('100 Continue'));
    } finally {
      await p.close();
      app.server.close();
    }
  });

  test('an upstream that ignores the expectation (no 100, waits for the body) still gets the body', async () => {
    let body = '';
    const silent = createNetServer((s) => {
      s.on('error', () => {});
      let got = '';
      s.setEncoding('latin1');
      s.on('data', (c: string) => {
        got += c;
        const end = got.indexOf('\r\n\r\n');
        if (end >= 0 && got.length - end - 4 >= 50_000) {
          body = got.slice(end + 4);
          s.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
        }
      });
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as AddressInfo).port;
    proxy.resolver.set(service('prod', 'ignores', { eps: { http: [ep('127.0.0.1', port)] } }));
    try {
      const reply = await expectUpload(proxy.egress, 'ignores.prod', 'e'.repeat(50_000));
      assert.match(
        reply,
        /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /,
        JSON.stringify(reply.slice(0, 200)),
      );
      assert.equal(body, 'e'.repeat(50_000));
    } finally {
      silent.close();
    }
  });
});
