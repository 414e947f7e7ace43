import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ep, service } from '../routing/fixtures.ts';
import { closedPort, metric, send, startBackend, startProxy, type Backend, type Proxy } from './harness.ts';

let a: Backend;
let b: Backend;
let proxy: Proxy;
let deadPort: number;

before(async () => {
  a = await startBackend();
  b = await startBackend();
  deadPort = await closedPort();
  proxy = await startProxy();
  const r = proxy.resolver;
  r.set(service('prod', 'web', { eps: { http: [ep('127.0.0.1', a.port), ep('127.0.0.1', b.port)] } }));
  r.set(service('prod', 'empty', { eps: { http: [] } }));
  r.set(service('prod', 'dead', { eps: { http: [ep('127.0.0.1', deadPort)] } }));
  r.set(service('prod', 'halfdead', { eps: { http: [ep('127.0.0.1', deadPort), ep('127.0.0.1', a.port)] } }));
  r.absent.add('prod/gone');
});

after(async () => {
  await proxy.close();
  await a.close();
  await b.close();
});

test('a Service name in Host is balanced across its endpoints', async () => {
  const seen = new Set<string>();
  for (let i = 0; i < 4; i++) {
    const r = await send(proxy.egress, { headers: { host: 'web.prod' } });
    assert.equal(r.status, 200);
    seen.add(r.body);
  }
  assert.deepEqual([...seen].sort(), [`hello from ${a.port}`, `hello from ${b.port}`].sort());
  assert.ok(
    (await metric(proxy, 'outrigger_requests_total', {
      direction: 'egress',
      service: 'prod/web',
      status: '200',
    })) >= 4,
  );
});

test('absolute-form (explicit proxy) requests route by the URL authority, not Host', async () => {
  const r = await send(proxy.egress, {
    path: 'http://web.prod.svc.cluster.local/x?y=1',
    headers: { host: 'ignored.example' },
  });
  assert.equal(r.status, 200);
  const hit = [...a.hits, ...b.hits].find((h) => h.url === '/x?y=1');
  assert.ok(hit, 'origin-form path reached the backend');
  assert.equal(hit.headers.host, 'web.prod.svc.cluster.local');
});

test('zero ready endpoints: 503, x-outrigger-error no_endpoints, counted', async () => {
  const r = await send(proxy.egress, { headers: { host: 'empty.prod' } });
  assert.equal(r.status, 503);
  assert.equal(r.headers['x-outrigger-error'], 'no_endpoints');
  assert.match(r.body, /prod\/empty has no ready endpoints/);
  assert.equal(
    await metric(proxy, 'outrigger_requests_total', {
      service: 'prod/empty',
      status: '503',
      error: 'no_endpoints',
    }),
    1,
  );
});

test('all endpoints failing to connect: 502 upstream_failed and a connect-error count', async () => {
  const r = await send(proxy.egress, { headers: { host: 'dead.prod' } });
  assert.equal(r.status, 502);
  assert.equal(r.headers['x-outrigger-error'], 'upstream_failed');
  assert.match(r.body, /ECONNREFUSED/);
  assert.ok((await metric(proxy, 'outrigger_upstream_connect_errors_total', { service: 'prod/dead' })) >= 1);
  assert.equal(
    await metric(proxy, 'outrigger_requests_total', {
      service: 'prod/dead',
      status: '502',
      error: 'upstream_failed',
    }),
    1,
  );
});

test('a failed connect is retried on another endpoint', async () => {
  for (let i = 0; i < 4; i++) {
    const r = await send(proxy.egress, { headers: { host: 'halfdead.prod' } });
    assert.equal(r.status, 200, r.body);
  }
  assert.ok(
    (await metric(proxy, 'outrigger_retries_total', {
      service: 'prod/halfdead',
      reason: 'connect_failure',
    })) >= 1,
  );
});

test('a POST with a body to a Service whose only endpoint refuses: 502', async () => {
  const r = await send(proxy.egress, { method: 'POST', headers: { host: 'dead.prod' }, body: 'payload' });
  assert.equal(r.status, 502);
  assert.equal(r.headers['x-outrigger-error'], 'upstream_failed');
});

test('names that are not cluster Services pass through to the resolved host', async () => {
  const r = await send(proxy.egress, { headers: { host: `127.0.0.1:${a.port}` } });
  assert.equal(r.status, 200);
  assert.equal(r.body, `hello from ${a.port}`);
  const gone = await send(proxy.egress, { headers: { host: 'gone.prod.svc.cluster.local:1' } });
  assert.equal(gone.status, 502, 'the absent Service went to DNS, which cannot resolve it');
});

test('requests to the sidecar itself are refused (loop guard)', async () => {
  const r = await send(proxy.egress, { headers: { host: `127.0.0.1:${proxy.egress}` } });
  assert.equal(r.status, 508);
  assert.equal(r.headers['x-outrigger-error'], 'loop_detected');
});

test('hop-by-hop headers are stripped both ways; x-forwarded-for is appended', async () => {
  const c = await startBackend((_req, res) => {
    res.setHeader('connection', 'x-secret-hop');
    res.setHeader('x-secret-hop', 'leak');
    res.setHeader('keep-alive', 'timeout=5');
    res.setHeader('x-kept', 'yes');
    res.end('ok');
  });
  proxy.resolver.set(service('prod', 'hyg', { eps: { http: [ep('127.0.0.1', c.port)] } }));
  try {
    const r = await send(proxy.egress, {
      headers: {
        host: 'hyg.prod',
        connection: 'x-foo, keep-alive',
        'x-foo': 'hop',
        'proxy-connection': 'keep-alive',
        'proxy-authorization': 'Basic Zm9vOmJhcg==',
        te: 'trailers',
        'x-forwarded-for': '203.0.113.9',
        'x-end-to-end': 'kept',
      },
    });
    assert.equal(r.status, 200);
    const h = c.hits[0]?.headers ?? {};
    for (const name of ['x-foo', 'proxy-connection', 'proxy-authorization', 'te'])
      assert.equal(h[name], undefined, name);
    assert.equal(h['x-end-to-end'], 'kept');
    assert.equal(h['x-forwarded-for'], '203.0.113.9, 127.0.0.1');
    assert.equal(r.headers['x-secret-hop'], undefined);
    assert.equal(r.headers['x-kept'], 'yes');
  } finally {
    await c.close();
  }
});

test('an upstream that does not answer in time: 504 upstream_timeout', async () => {
  const slow = await startBackend(() => {});
  const p = await startProxy({ requestTimeoutMs: 200 });
  p.resolver.set(service('prod', 'slow', { eps: { http: [ep('127.0.0.1', slow.port)] } }));
  try {
    const r = await send(p.egress, { headers: { host: 'slow.prod' } });
    assert.equal(r.status, 504);
    assert.equal(r.headers['x-outrigger-error'], 'upstream_timeout');
    assert.equal(
      await metric(p, 'outrigger_requests_total', {
        service: 'prod/slow',
        status: '504',
        error: 'upstream_timeout',
      }),
      1,
    );
  } finally {
    await p.close();
    await slow.close();
  }
});

test('cluster-only egress policy: 403 egress_denied for anything that is not a Service', async () => {
  const p = await startProxy({ egressPolicy: 'cluster-only' });
  try {
    const r = await send(p.egress, { headers: { host: `127.0.0.1:${a.port}` } });
    assert.equal(r.status, 403);
    assert.equal(r.headers['x-outrigger-error'], 'egress_denied');
    assert.match(r.body, /cluster-only/);
    const unknown = await send(p.egress, { headers: { host: 'nodata.prod' } });
    assert.equal(unknown.status, 403);
    assert.equal(await metric(p, 'outrigger_requests_total', { status: '403', error: 'egress_denied' }), 2);
  } finally {
    await p.close();
  }
});

test('configured statuses are retried for idempotent bodiless requests only', async () => {
  const flaky = await startBackend((_req, res) => {
    res.statusCode = 503;
    res.end('busy');
  });
  const p = await startProxy({ retryStatuses: [503] });
  p.resolver.set(
    service('prod', 'mixed', { eps: { http: [ep('127.0.0.1', flaky.port), ep('127.0.0.1', a.port)] } }),
  );
  try {
    for (let i = 0; i < 4; i++)
      assert.equal((await send(p.egress, { headers: { host: 'mixed.prod' } })).status, 200);
    const post = await Promise.all(
      [0, 1].map(() => send(p.egress, { method: 'POST', headers: { host: 'mixed.prod' }, body: 'x' })),
    );
    assert.ok(
      post.some((r) => r.status === 503),
      'a POST gets the 503 as it is',
    );
    // A single-endpoint Service cannot retry elsewhere: the app's own 503 reaches the client untouched.
    p.resolver.set(service('prod', 'only', { eps: { http: [ep('127.0.0.1', flaky.port)] } }));
    const only = await send(p.egress, { headers: { host: 'only.prod' } });
    assert.equal(only.status, 503);
    assert.equal(only.body, 'busy');
    assert.equal(only.headers['x-outrigger-error'], undefined);
  } finally {
    await p.close();
    await flaky.close();
  }
});

test('a POST body is replayed to another endpoint after a failed connect, never in part', async () => {
  const got: string[] = [];
  const sink = await startBackend((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => {
      got.push(body);
      res.end(`got ${body.length}`);
    });
  });
  // Round robin from a fresh Service: the refusing endpoint is always tried first.
  proxy.resolver.set(
    service('prod', 'post1', { eps: { http: [ep('127.0.0.1', deadPort), ep('127.0.0.1', sink.port)] } }),
  );
  proxy.resolver.set(
    service('prod', 'post2', { eps: { http: [ep('127.0.0.1', deadPort), ep('127.0.0.1', sink.port)] } }),
  );
  try {
    const small = 'x'.repeat(10_000);
    const r = await send(proxy.egress, { method: 'POST', headers: { host: 'post1.prod' }, body: small });
    assert.equal(r.status, 200);
    assert.equal(r.body, 'got 10000');
    assert.deepEqual(got, [small]);
    // Whether the refusal comes before or after the first 64 KiB arrived decides between a retry
    // and a 502; either way the backend sees the whole body once or not at all, never a part.
    const big = await send(proxy.egress, {
      method: 'POST',
      headers: { host: 'post2.prod' },
      body: 'y'.repeat(70_000),
    });
    if (big.status === 200) assert.deepEqual([got.length, got[1]?.length], [2, 70_000]);
    else {
      assert.equal(big.status, 502);
      assert.equal(big.headers['x-outrigger-error'], 'upstream_failed');
      assert.equal(got.length, 1);
    }
  } finally {
    await sink.close();
  }
});

test('internalTrafficPolicy: Local on the sidecar node: its endpoint, else a 503 naming the node', async () => {
  const local = await startProxy({}, { nodeName: 'node-a' });
  try {
    const eps = {
      http: [
        ep('127.0.0.1', a.port, { nodeName: 'node-a' }),
        ep('127.0.0.1', b.port, { nodeName: 'node-b' }),
      ],
    };
    local.resolver.set(service('prod', 'agent', { internalTrafficPolicy: 'Local', eps }));
    local.resolver.set(
      service('prod', 'remote', { internalTrafficPolicy: 'Local', eps: { http: eps.http.slice(1) } }),
    );
    for (let i = 0; i < 4; i++) {
      const r = await send(local.egress, { headers: { host: 'agent.prod' } });
      assert.equal(r.body, `hello from ${a.port}`, 'only the endpoint on node-a');
    }
    const r = await send(local.egress, { headers: { host: 'remote.prod' } });
    assert.equal(r.status, 503);
    assert.equal(r.headers['x-outrigger-error'], 'no_endpoints');
    assert.match(r.body, /no ready endpoints on node node-a \(internalTrafficPolicy: Local\)/);
  } finally {
    await local.close();
  }
});
