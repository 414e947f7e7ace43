import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as h2server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { KubeError, type WatchEvent } from '../../../src/kube/api.ts';
import { createTransport } from '../../../src/kube/transport.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

async function serve(handler: Handler): Promise<{ url: URL; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`), server };
}

function conn(url: URL, tokens: string[]) {
  let i = 0;
  const seen = { refreshes: 0 };
  return {
    seen,
    conn: {
      server: url,
      authorization: () => `Bearer ${tokens[i]}`,
      unauthorized: () => {
        seen.refreshes++;
        const changed = i + 1 < tokens.length;
        if (changed) i++;
        return Promise.resolve(changed);
      },
    },
  };
}

const signal = (): AbortSignal => new AbortController().signal;

test('list sends the bearer token and returns items and the resourceVersion', async () => {
  const auth: (string | undefined)[] = [];
  const { url, server } = await serve((req, res) => {
    auth.push(req.headers.authorization);
    assert.match(req.url ?? '', /labelSelector=a%3Db/);
    res.end(JSON.stringify({ metadata: { resourceVersion: '42' }, items: [{ metadata: { name: 'x' } }] }));
  });
  const t = createTransport(conn(url, ['tok-1']).conn);
  try {
    const r = await t.list('/api/v1/services', { labelSelector: 'a=b' }, signal());
    assert.equal(r.resourceVersion, '42');
    assert.equal(r.items.length, 1);
    assert.deepEqual(auth, ['Bearer tok-1']);
  } finally {
    t.close();
    server.close();
  }
});

test('a 401 re-reads the credentials and retries once with the new token', async () => {
  const { url, server } = await serve((req, res) => {
    if (req.headers.authorization !== 'Bearer new') {
      res.statusCode = 401;
      res.end(JSON.stringify({ kind: 'Status', code: 401, message: 'Unauthorized' }));
      return;
    }
    res.end(JSON.stringify({ metadata: { resourceVersion: '1' }, items: [] }));
  });
  const rotated = conn(url, ['old', 'new']);
  const t = createTransport(rotated.conn);
  const same = conn(url, ['old']);
  const t2 = createTransport(same.conn);
  try {
    await t.list('/api/v1/services', {}, signal());
    assert.equal(t.stats.unauthorizedRetries, 1);
    await assert.rejects(t2.list('/api/v1/services', {}, signal()), (e: unknown) => {
      return e instanceof KubeError && e.code === 'kube_unauthorized' && e.status === 401;
    });
    assert.equal(same.seen.refreshes, 1, 'one refresh, no retry when the token did not change');
    assert.equal(t2.stats.unauthorizedRetries, 0);
  } finally {
    t.close();
    t2.close();
    server.close();
  }
});

test('HTTP errors map to stable codes with the Status message', async () => {
  const statuses = [500, 429, 403, 410, 404];
  let n = 0;
  const { url, server } = await serve((_req, res) => {
    res.statusCode = statuses[n++] ?? 500;
    res.end(JSON.stringify({ kind: 'Status', message: 'etcdserver: request timed out' }));
  });
  const t = createTransport(conn(url, ['x']).conn);
  try {
    const codes: string[] = [];
    for (let i = 0; i < statuses.length; i++) {
      const e = await t.list('/p', {}, signal()).catch((err: unknown) => err);
      assert.ok(e instanceof KubeError);
      assert.match(e.message, /etcdserver: request timed out/);
      codes.push(e.code);
    }
    assert.deepEqual(codes, [
      'kube_unavailable',
      'kube_unavailable',
      'kube_forbidden',
      'kube_gone',
      'kube_bad_response',
    ]);
    assert.equal(t.stats.failures, statuses.length);
  } finally {
    t.close();
    server.close();
  }
});

test('watch streams events split across chunks, opens on 200, and ends cleanly', async () => {
  const { url, server } = await serve((req, res) => {
    assert.match(req.url ?? '', /watch=1/);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.flushHeaders();
    const a = JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '5' } } });
    const b = JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '6' } } });
    res.write(a.slice(0, 10));
    setTimeout(() => res.end(a.slice(10) + '\n' + b + '\n'), 20);
  });
  const t = createTransport(conn(url, ['x']).conn);
  try {
    const events: WatchEvent[] = [];
    let opened = false;
    await t.watch('/p', {}, { onOpen: () => (opened = true), onEvent: (e) => events.push(e) }, signal());
    assert.equal(opened, true);
    assert.deepEqual(
      events.map((e) => e.type),
      ['ADDED', 'BOOKMARK'],
    );
    assert.equal(t.stats.openWatches, 0);
  } finally {
    t.close();
    server.close();
  }
});

test('a torn or garbled watch stream rejects instead of ending quietly', async () => {
  let mode = 0;
  const { url, server } = await serve((_req, res) => {
    res.writeHead(200);
    res.flushHeaders();
    if (mode++ === 0) {
      res.write('{"type":"ADDED","object":{}}\n');
      setTimeout(() => res.socket?.destroy(), 20);
    } else {
      res.end('not json\n');
    }
  });
  const t = createTransport(conn(url, ['x']).conn);
  try {
    const handlers = { onOpen: () => undefined, onEvent: () => undefined };
    await assert.rejects(
      t.watch('/p', {}, handlers, signal()),
      (e: unknown) => e instanceof KubeError && e.code === 'kube_unavailable',
    );
    await assert.rejects(
      t.watch('/p', {}, handlers, signal()),
      (e: unknown) => e instanceof KubeError && e.code === 'kube_bad_response',
    );
  } finally {
    t.close();
    server.close();
  }
});

test('HTTP/2: lists and many concurrent watches share one connection', async () => {
  const sessions = new Set<unknown>();
  const streams: ServerHttp2Stream[] = [];
  const server = h2server();
  server.on('session', (s) => sessions.add(s));
  server.on('stream', (stream, headers) => {
    const path = String(headers[':path']);
    if (!path.includes('watch=1')) {
      stream.respond({ ':status': 200 });
      stream.end(JSON.stringify({ metadata: { resourceVersion: '7' }, items: [{}, {}] }));
      return;
    }
    stream.respond({ ':status': 200 });
    stream.write(JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '8' } } }) + '\n');
    streams.push(stream);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  const t = createTransport(conn(url, ['x']).conn, { protocol: 'h2' });
  try {
    assert.equal((await t.list('/p', {}, signal())).items.length, 2);
    const events: string[] = [];
    const watches = Array.from({ length: 20 }, () =>
      t.watch('/w', {}, { onOpen: () => undefined, onEvent: (e) => events.push(e.type) }, signal()).then(
        () => 'ended',
        (e: unknown) => (e instanceof Error ? e.message : String(e)),
      ),
    );
    for (let i = 0; i < 200 && t.stats.openWatches < 20; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(t.stats.openWatches, 20);
    assert.equal(sessions.size, 1, 'one connection for everything');
    for (const s of streams) s.end();
    assert.deepEqual(new Set(await Promise.all(watches)), new Set(['ended']));
    assert.equal(events.length, 20);
  } finally {
    t.close();
    server.close();
  }
});

test('a 401 whose token did not change fails promptly even when re-reading the token is slow', async () => {
  const { url, server } = await serve((_req, res) => {
    res.statusCode = 401;
    res.end(JSON.stringify({ kind: 'Status', code: 401, message: 'Unauthorized' }));
  });
  const slow = {
    server: url,
    authorization: () => 'Bearer old',
    unauthorized: () => new Promise<boolean>((r) => setTimeout(() => r(false), 100)),
  };
  const t = createTransport(slow);
  const guard = new AbortController();
  try {
    // A liveness guard, not a timing assertion: the bug this pins down waited forever for a body
    // that had already been drained.
    const hung = new Promise<string>((r) => {
      const timer = setTimeout(() => r('hung'), 5_000);
      guard.signal.addEventListener('abort', () => clearTimeout(timer));
    });
    const outcome = await Promise.race([
      t.list('/p', {}, signal()).then(
        () => 'resolved',
        (e: unknown) => (e instanceof KubeError ? e.code : 'other'),
      ),
      hung,
    ]);
    assert.equal(outcome, 'kube_unauthorized');
  } finally {
    guard.abort();
    t.close();
    server.close();
  }
});

test('mergePatch sends a PATCH with a merge-patch body over HTTP/1.1 and HTTP/2; errors keep their codes', async () => {
  const seen: { method: string; type: string; body: string }[] = [];
  const record = (method: string, type: string, body: string, status: number) => {
    seen.push({ method, type, body });
    return status;
  };
  const h1 = await serve((req, res) => {
    let b = '';
    req.on('data', (c: Buffer) => (b += c.toString()));
    req.on('end', () => {
      res.statusCode = record(
        req.method ?? '',
        String(req.headers['content-type']),
        b,
        req.url?.includes('forbidden') ? 403 : 200,
      );
      res.end('{}');
    });
  });
  const h2 = h2server();
  h2.on('stream', (stream, headers) => {
    let b = '';
    stream.on('data', (c: Buffer) => (b += c.toString()));
    stream.on('end', () => {
      stream.respond({
        ':status': record(String(headers[':method']), String(headers['content-type']), b, 200),
      });
      stream.end('{}');
    });
  });
  await new Promise<void>((r) => h2.listen(0, '127.0.0.1', r));
  const h2url = new URL(`http://127.0.0.1:${(h2.address() as AddressInfo).port}`);
  const t1 = createTransport(conn(h1.url, ['x']).conn);
  const t2 = createTransport(conn(h2url, ['x']).conn, { protocol: 'h2' });
  try {
    const patch = { status: { loadBalancer: { ingress: [{ ip: '192.0.2.1' }] } } };
    await t1.mergePatch('/apis/x/status', patch, signal());
    await t2.mergePatch('/apis/x/status', patch, signal());
    assert.deepEqual(seen, [
      { method: 'PATCH', type: 'application/merge-patch+json', body: JSON.stringify(patch) },
      { method: 'PATCH', type: 'application/merge-patch+json', body: JSON.stringify(patch) },
    ]);
    await assert.rejects(
      t1.mergePatch('/forbidden', patch, signal()),
      (e: unknown) => e instanceof KubeError && e.code === 'kube_forbidden',
    );
  } finally {
    t1.close();
    t2.close();
    h1.server.close();
    h2.close();
  }
});

test("a 429's Retry-After reaches the error over HTTP/1.1 and HTTP/2; other answers and bad values carry none", async () => {
  const answers: [number, string | undefined][] = [
    [429, '3'],
    [503, '2'],
    [429, 'Wed, 21 Oct 2015 07:28:00 GMT'],
    [429, '100000'],
    [500, '5'],
  ];
  let i = 0;
  const { url, server } = await serve((_req, res) => {
    const [code, after] = answers[i++ % answers.length] ?? [500, undefined];
    res.statusCode = code;
    if (after) res.setHeader('retry-after', after);
    res.end(JSON.stringify({ kind: 'Status', code, message: 'too many requests' }));
  });
  const h2 = h2server();
  let j = 0;
  h2.on('stream', (stream) => {
    const [code, after] = answers[j++ % answers.length] ?? [500, undefined];
    stream.respond({ ':status': code, ...(after ? { 'retry-after': after } : {}) });
    stream.end('{}');
  });
  await new Promise<void>((r) => h2.listen(0, '127.0.0.1', r));
  const h2url = new URL(`http://127.0.0.1:${(h2.address() as AddressInfo).port}`);
  const t1 = createTransport(conn(url, ['x']).conn);
  const t2 = createTransport(conn(h2url, ['x']).conn, { protocol: 'h2' });
  try {
    for (const t of [t1, t2]) {
      const got: (number | undefined)[] = [];
      for (let k = 0; k < answers.length; k++) {
        const e = await t.list('/p', {}, signal()).then(
          () => undefined,
          (err: unknown) => err,
        );
        assert.ok(e instanceof KubeError);
        assert.equal(e.code, 'kube_unavailable');
        got.push(e.retryAfterMs);
      }
      // Seconds only, capped at 60 s; never on a 500.
      assert.deepEqual(got, [3000, 2000, undefined, 60_000, undefined]);
    }
  } finally {
    t1.close();
    t2.close();
    server.close();
    h2.close();
  }
});

test("apply is a server-side apply by a field manager: the API's answer back, a create's 201 too; a conflict's 409 an error", async () => {
  const seen: { url: string; type: string; body: string }[] = [];
  const { url, server } = await serve((req, res) => {
    let b = '';
    req.on('data', (c: Buffer) => (b += c.toString()));
    req.on('end', () => {
      seen.push({ url: req.url ?? '', type: String(req.headers['content-type']), body: b });
      res.statusCode = req.url?.includes('/taken') ? 409 : 201;
      res.end(
        res.statusCode === 201
          ? JSON.stringify({ spec: { clusterIP: '10.96.0.7' } })
          : '{"message":"conflict"}',
      );
    });
  });
  const t = createTransport(conn(url, ['x']).conn);
  try {
    const svc = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'a' } };
    assert.deepEqual(await t.apply('/api/v1/namespaces/gw/services/a', svc, 'outrigger-gateway', signal()), {
      spec: { clusterIP: '10.96.0.7' },
    });
    assert.deepEqual(seen[0], {
      url: '/api/v1/namespaces/gw/services/a?fieldManager=outrigger-gateway',
      type: 'application/apply-patch+yaml',
      body: JSON.stringify(svc),
    });
    await assert.rejects(
      t.apply('/taken', svc, 'outrigger-gateway', signal()),
      (e: unknown) => e instanceof KubeError && e.status === 409,
    );
  } finally {
    t.close();
    server.close();
  }
});
