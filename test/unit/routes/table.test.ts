import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseDuration } from '../../../src/routes/duration.ts';
import { slimReferenceGrant } from '../../../src/routes/objects.ts';
import { grant, grpcRoute, httpListener, pick, req, route, svc, tableOf } from './fixtures.ts';

const backend = [svc('web')];

test('matches are ordered as the spec says, whatever the order they are written in', () => {
  const t = tableOf([
    route('a', {
      rules: [
        { matches: [{ path: { type: 'PathPrefix', value: '/' } }], backendRefs: backend },
        { matches: [{ path: { type: 'PathPrefix', value: '/api' } }], backendRefs: backend },
        { matches: [{ path: { type: 'Exact', value: '/api/v1' } }], backendRefs: backend },
        { matches: [{ path: { type: 'PathPrefix', value: '/api' }, method: 'POST' }], backendRefs: backend },
        {
          matches: [
            {
              path: { type: 'PathPrefix', value: '/api' },
              method: 'POST',
              headers: [{ name: 'X-V', value: '2' }],
            },
          ],
          backendRefs: backend,
        },
        {
          matches: [
            { path: { type: 'PathPrefix', value: '/api' }, queryParams: [{ name: 'v', value: '3' }] },
          ],
          backendRefs: backend,
        },
      ],
    }),
  ]);
  assert.equal(pick(t, 'x', '/other'), 'shop/a#0');
  assert.equal(pick(t, 'x', '/api/v1'), 'shop/a#2', 'Exact before any prefix');
  assert.equal(pick(t, 'x', '/api/v1', { method: 'POST' }), 'shop/a#2');
  assert.equal(pick(t, 'x', '/api/v2'), 'shop/a#1');
  assert.equal(pick(t, 'x', '/api/v2', { method: 'POST' }), 'shop/a#3', 'a method match before none');
  assert.equal(
    pick(t, 'x', '/api/v2', { method: 'POST', headers: { 'x-v': '2' } }),
    'shop/a#4',
    'more headers first',
  );
  assert.equal(pick(t, 'x', '/api/v2', { query: 'v=3' }), 'shop/a#5');
  assert.equal(
    pick(t, 'x', '/api/v2', { query: 'v=4&v=3' }),
    'shop/a#1',
    'only the first value of a parameter counts',
  );
});

test('a prefix matches by whole path elements and ignores its trailing slash', () => {
  const t = tableOf([
    route('a', {
      rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/abc/' } }], backendRefs: backend }],
    }),
  ]);
  for (const p of ['/abc', '/abc/', '/abc/def']) assert.equal(pick(t, 'x', p), 'shop/a#0', p);
  assert.equal(pick(t, 'x', '/abcd'), undefined);
  assert.equal(pick(t, 'x', '/ab'), undefined);
});

test('ties between routes: the oldest, then namespace/name; within a route the first rule', () => {
  const rule = { matches: [{ path: { type: 'PathPrefix', value: '/p' } }], backendRefs: backend };
  const t = tableOf([
    route('young', { rules: [rule] }, 'shop', '2026-02-01T00:00:00Z'),
    route('b', { rules: [rule, rule] }, 'shop'),
    route('a', { rules: [rule] }, 'zoo'),
  ]);
  assert.equal(pick(t, 'x', '/p'), 'shop/b#0');
  const u = tableOf([route('b', { rules: [rule] }, 'zoo'), route('a', { rules: [rule] }, 'zoo')]);
  assert.equal(pick(u, 'x', '/p'), 'zoo/a#0');
});

test('hosts: exact before the longest wildcard before none, falling back when a host has no match', () => {
  const at = (value: string) => ({
    rules: [{ matches: [{ path: { type: 'PathPrefix', value } }], backendRefs: backend }],
  });
  const t = tableOf([
    route('exact', { hostnames: ['a.b.example.com'], ...at('/only') }),
    route('wild', { hostnames: ['*.b.example.com'], ...at('/') }),
    route('wider', { hostnames: ['*.example.com'], ...at('/') }),
    route('any', at('/')),
  ]);
  assert.equal(pick(t, 'a.b.example.com', '/only'), 'shop/exact#0');
  assert.equal(pick(t, 'a.b.example.com', '/other'), 'shop/wild#0');
  assert.equal(pick(t, 'c.b.example.com', '/'), 'shop/wild#0');
  assert.equal(pick(t, 'b.example.com', '/'), 'shop/wider#0');
  assert.equal(pick(t, 'example.com', '/'), 'shop/any#0', 'a wildcard never matches its own suffix');
  assert.equal(pick(t, 'example.org', '/'), 'shop/any#0');
});

test('listener and route hostnames intersect; no intersection is NoMatchingListenerHostname', () => {
  const listeners = [
    httpListener({ name: 'wild', hostname: '*.example.com' }),
    httpListener({ name: 'exact', hostname: 'bar.com' }),
  ];
  const rule = { rules: [{ backendRefs: backend }] };
  const t = tableOf(
    [
      route('both', { hostnames: ['foo.example.com', 'foo.example.net'], ...rule }),
      route('wider', {
        parentRefs: [{ name: 'edge', namespace: 'infra', sectionName: 'exact' }],
        hostnames: ['*.com'],
        ...rule,
      }),
      route('none', {
        parentRefs: [{ name: 'edge', namespace: 'infra', sectionName: 'exact' }],
        hostnames: ['x.org'],
        ...rule,
      }),
    ],
    listeners,
  );
  assert.equal(pick(t, 'foo.example.com', '/'), 'shop/both#0');
  assert.equal(
    pick(t, 'foo.example.net', '/'),
    undefined,
    'a route hostname outside the listener is ignored',
  );
  assert.equal(pick(t, 'bar.com', '/'), 'shop/wider#0', 'a wildcard route serves the exact listener host');
  assert.equal(pick(t, 'baz.com', '/'), undefined);
  const none = t.routeStatus().get('HTTPRoute shop/none')![0]!.conditions[0]!;
  assert.deepEqual([none.status, none.reason], ['False', 'NoMatchingListenerHostname']);
  assert.deepEqual(
    t.listenerStatus('infra/edge').map((l) => [l.name, l.attachedRoutes]),
    [
      ['wild', 1],
      ['exact', 1],
    ],
  );
});

test('attachment: allowedRoutes, sectionName, port, foreign classes, and the reasons given', () => {
  const listeners = [
    httpListener({ name: 'same', allowedRoutes: { namespaces: { from: 'Same' } } }),
    httpListener({ name: 'all', port: 8080 }),
    httpListener({
      name: 'kinds',
      allowedRoutes: { namespaces: { from: 'All' }, kinds: [{ kind: 'TLSRoute' }] },
    }),
    httpListener({ name: 'tcp', protocol: 'TCP' }),
  ];
  const to = (parentRef: Record<string, unknown>) => ({
    parentRefs: [{ name: 'edge', namespace: 'infra', ...parentRef }],
    rules: [{ backendRefs: backend }],
  });
  const t = tableOf(
    [
      route('same-other-ns', to({ sectionName: 'same' })),
      route('same-ns', to({ sectionName: 'same' }), 'infra'),
      route('by-port', to({ port: 8080 })),
      route('missing', to({ sectionName: 'nope' })),
      route('kinds', to({ sectionName: 'kinds' })),
      route('tcp', to({ sectionName: 'tcp' })),
      route('foreign', { parentRefs: [{ name: 'elsewhere' }], rules: [{ backendRefs: backend }] }),
    ],
    listeners,
  );
  const reason = (r: string) => {
    const c = t.routeStatus().get(`HTTPRoute ${r}`)![0]!.conditions[0]!;
    return `${c.status}/${c.reason}`;
  };
  assert.equal(reason('shop/same-other-ns'), 'False/NotAllowedByListeners');
  assert.equal(reason('infra/same-ns'), 'True/Accepted');
  assert.equal(reason('shop/by-port'), 'True/Accepted');
  assert.equal(reason('shop/missing'), 'False/NoMatchingParent');
  assert.equal(reason('shop/kinds'), 'False/NotAllowedByListeners');
  assert.equal(reason('shop/tcp'), 'False/NotAllowedByListeners');
  assert.equal(
    t.routeStatus().has('HTTPRoute shop/foreign'),
    false,
    'no status for a parent that is not ours',
  );
  const ls = Object.fromEntries(t.listenerStatus('infra/edge').map((l) => [l.name, l]));
  assert.deepEqual(ls.kinds!.supportedKinds, []);
  assert.equal(ls.kinds!.conditions.find((c) => c.type === 'ResolvedRefs')!.reason, 'InvalidRouteKinds');
  assert.equal(ls.tcp!.conditions[0]!.reason, 'UnsupportedProtocol');
  assert.equal(ls.all!.attachedRoutes, 1);
});

test('a Gateway of another controller class is not served', () => {
  const t = tableOf([route('a', { rules: [{ backendRefs: backend }] })]);
  assert.equal(t.gateways().size, 1);
  assert.deepEqual([...t.classes().keys()], ['outrigger']);
});

test('unsupported values reject the whole route with UnsupportedValue; nothing of it is served', () => {
  const t = tableOf([
    route('regex', {
      rules: [
        { matches: [{ path: { type: 'PathPrefix', value: '/ok' } }], backendRefs: backend },
        { matches: [{ path: { type: 'RegularExpression', value: '/(a+)+$' } }], backendRefs: backend },
      ],
    }),
    route('mirror', {
      rules: [{ filters: [{ type: 'RequestMirror', requestMirror: {} }], backendRefs: backend }],
    }),
    route('timeout', { rules: [{ timeouts: { request: '1.5s' }, backendRefs: backend }] }),
  ]);
  assert.equal(pick(t, 'x', '/ok'), undefined);
  for (const r of ['shop/regex', 'shop/mirror', 'shop/timeout']) {
    const c = t.routeStatus().get(`HTTPRoute ${r}`)![0]!.conditions[0]!;
    assert.deepEqual([c.status, c.reason], ['False', 'UnsupportedValue'], r);
  }
});

test('backendRefs: another namespace needs a ReferenceGrant; other kinds are InvalidKind', () => {
  const rules = (refs: unknown[]) => ({ rules: [{ backendRefs: refs }] });
  const routes = [
    route('cross', rules([svc('db', 80, { namespace: 'data' })])),
    route('kind', rules([{ group: 'example.com', kind: 'Bucket', name: 'b' }])),
  ];
  const status = (t: ReturnType<typeof tableOf>, r: string) => {
    const c = t
      .routeStatus()
      .get(`HTTPRoute ${r}`)![0]!
      .conditions.find((x) => x.type === 'ResolvedRefs')!;
    return `${c.status}/${c.reason}`;
  };
  const denied = tableOf(routes);
  assert.equal(status(denied, 'shop/cross'), 'False/RefNotPermitted');
  assert.equal(status(denied, 'shop/kind'), 'False/InvalidKind');
  const cross = denied.lookup('http', 'x', { method: 'GET', path: '/', query: '', header: () => undefined });
  assert.ok(cross && 'invalid' in cross.rule.backends[0]!, 'the route is served; the backend answers 500');
  assert.equal(
    status(tableOf(routes, undefined, [grant('data', 'shop')]), 'shop/cross'),
    'True/ResolvedRefs',
  );
  assert.equal(
    status(tableOf(routes, undefined, [grant('data', 'shop', 'other')]), 'shop/cross'),
    'False/RefNotPermitted',
  );
  assert.equal(
    status(tableOf(routes, undefined, [grant('data', 'elsewhere')]), 'shop/cross'),
    'False/RefNotPermitted',
  );
});

test('HTTPS listeners serve only https requests, HTTP only http', () => {
  const t = tableOf(
    [
      route('a', {
        parentRefs: [{ name: 'edge', namespace: 'infra', sectionName: 'https' }],
        rules: [{ backendRefs: backend }],
      }),
    ],
    [
      httpListener(),
      httpListener({
        name: 'https',
        port: 443,
        protocol: 'HTTPS',
        tls: { certificateRefs: [{ name: 'c' }] },
      }),
    ],
  );
  assert.equal(pick(t, 'x', '/', {}, 'https'), 'shop/a#0');
  assert.equal(pick(t, 'x', '/', {}, 'http'), undefined);
});

test('allowedRoutes by namespace selector: matchLabels and matchExpressions; unknown labels admit nothing', () => {
  const selector = {
    matchLabels: { team: 'shop' },
    matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['dev'] }],
  };
  const listeners = [httpListener({ allowedRoutes: { namespaces: { from: 'Selector', selector } } })];
  const rule = { rules: [{ backendRefs: backend }] };
  const namespaces = new Map<string, Record<string, string>>([
    ['shop', { team: 'shop', env: 'prod' }],
    ['dev', { team: 'shop', env: 'dev' }],
    ['other', { team: 'other' }],
  ]);
  const t = tableOf(
    [
      route('a', rule, 'shop'),
      route('b', rule, 'dev'),
      route('c', rule, 'other'),
      route('d', rule, 'unlisted'),
    ],
    listeners,
    [],
    namespaces,
  );
  const accepted = (r: string) => t.routeStatus().get(`HTTPRoute ${r}`)![0]!.conditions[0]!.status;
  assert.deepEqual(['shop/a', 'dev/b', 'other/c', 'unlisted/d'].map(accepted), [
    'True',
    'False',
    'False',
    'False',
  ]);
});

test('listener status: route kinds it can serve, and why an HTTPS certificate is not resolved', () => {
  const https = (name: string, certificateRefs: unknown[]) =>
    httpListener({
      name,
      port: 443,
      protocol: 'HTTPS',
      hostname: `${name}.example.com`,
      tls: { certificateRefs },
    });
  const t = tableOf(
    [],
    [
      httpListener({
        name: 'kinds',
        allowedRoutes: { kinds: [{ kind: 'HTTPRoute' }, { kind: 'FooRoute' }] },
      }),
      https('ok', [{ name: 'tls' }]),
      https('missing', [{ name: 'gone' }]),
      https('kind', [{ group: 'example.com', kind: 'Vault', name: 'x' }]),
      https('foreign', [{ name: 'tls', namespace: 'elsewhere' }]),
      https('granted', [{ name: 'tls', namespace: 'certs' }]),
    ],
    [
      slimReferenceGrant({
        metadata: { namespace: 'certs', name: 'g' },
        spec: {
          from: [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', namespace: 'infra' }],
          to: [{ group: '', kind: 'Secret' }],
        },
      }),
    ],
  );
  const usable = new Set(['infra/tls', 'certs/tls']);
  const ls = Object.fromEntries(t.listenerStatus('infra/edge', (k) => usable.has(k)).map((l) => [l.name, l]));
  const refs = (n: string) => {
    const c = ls[n]!.conditions.find((x) => x.type === 'ResolvedRefs')!;
    const p = ls[n]!.conditions.find((x) => x.type === 'Programmed')!;
    return `${c.status}/${c.reason} ${p.status}`;
  };
  assert.equal(refs('kinds'), 'False/InvalidRouteKinds False');
  assert.deepEqual(ls.kinds!.supportedKinds, [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute' }]);
  assert.equal(refs('ok'), 'True/ResolvedRefs True');
  assert.equal(refs('missing'), 'False/InvalidCertificateRef False');
  assert.equal(refs('kind'), 'False/InvalidCertificateRef False');
  assert.equal(refs('foreign'), 'False/RefNotPermitted False');
  assert.equal(refs('granted'), 'True/ResolvedRefs True');
  assert.equal(t.tlsFor('granted.example.com'), 'certs/tls');
  assert.equal(t.tlsFor('foreign.example.com'), undefined);
});

test('every granted certificate is read, also when another listener serves its hostname first', () => {
  const https = (name: string, secret: string) =>
    httpListener({ name, port: 443, protocol: 'HTTPS', tls: { certificateRefs: [{ name: secret }] } });
  const t = tableOf([], [https('first', 'a'), https('second', 'b')]);
  assert.equal(t.tlsFor('any.example.com'), 'infra/a');
  assert.deepEqual([...t.tlsSecrets()].sort(), ['infra/a', 'infra/b']);
});

test('rule timeouts in milliseconds; 0s is none', () => {
  const t = tableOf([
    route('a', {
      hostnames: ['a'],
      rules: [{ timeouts: { request: '1m30s', backendRequest: '500ms' }, backendRefs: backend }],
    }),
    route('b', { hostnames: ['b'], rules: [{ timeouts: { request: '0s' }, backendRefs: backend }] }),
  ]);
  assert.deepEqual(t.lookup('http', 'a', req('/'))?.rule.timeouts, {
    requestMs: 90_000,
    backendRequestMs: 500,
  });
  assert.equal(t.lookup('http', 'b', req('/'))?.rule.timeouts, undefined);
});

test('durations as Gateway API writes them', () => {
  const ok: [string, number][] = [
    ['10s', 10_000],
    ['500ms', 500],
    ['1h30m', 5_400_000],
    ['1h1m1s1ms', 3_661_001],
    ['0s', 0],
  ];
  for (const [text, ms] of ok) assert.equal(parseDuration(text), ms, text);
  for (const bad of ['', '1.5s', '10', '-1s', '1d', '123456s', '1s1s1s1s1s', '1 s'])
    assert.equal(parseDuration(bad), undefined, bad);
});

const ECHO = 'grpc.echo.Echo';
const method = (service: string | undefined, m: string | undefined) => ({
  matches: [{ method: { ...(service ? { service } : {}), ...(m ? { method: m } : {}) } }],
  backendRefs: backend,
});

test('GRPCRoute at a listener: method and header matches by the GRPCRoute precedence; a call no rule names unmatched', () => {
  const t = tableOf([
    grpcRoute('rpc', {
      hostnames: ['rpc.example.com'],
      rules: [
        method(ECHO, undefined),
        method(ECHO, 'Echo'),
        { matches: [{ headers: [{ name: 'X-Lane', value: 'b' }] }], backendRefs: backend },
        method(undefined, 'Health'),
      ],
    }),
  ]);
  const at = (path: string, headers?: Record<string, string>) =>
    pick(t, 'rpc.example.com', path, headers ? { headers } : {});
  assert.equal(at(`/${ECHO}/Echo`), 'shop/rpc#1', 'service and method before the service alone');
  assert.equal(at(`/${ECHO}/EchoTwo`), 'shop/rpc#0');
  assert.equal(at(`/${ECHO}/Echo`, { 'x-lane': 'b' }), 'shop/rpc#1', 'a method match ranks before headers');
  assert.equal(at('/other.Svc/Call', { 'x-lane': 'b' }), 'shop/rpc#2');
  assert.equal(at('/other.Svc/Health'), 'shop/rpc#3', 'a method in any service');
  assert.equal(at('/other.Svc/Call'), undefined);
  assert.equal(pick(t, 'web.example.com', `/${ECHO}/Echo`), undefined, 'the hostnames still apply');
  const st = t
    .routeStatus()
    .get('GRPCRoute shop/rpc')![0]!
    .conditions.map((c) => `${c.type}=${c.status}`);
  assert.deepEqual(st, ['Accepted=True', 'ResolvedRefs=True']);
});

test('an HTTPRoute and a GRPCRoute of one name are two routes; only the older of overlapping hostnames attaches', () => {
  const older = '2026-01-01T00:00:00Z';
  const younger = '2026-01-02T00:00:00Z';
  const listeners = [httpListener(), httpListener({ name: 'other', port: 8080 })];
  const t = tableOf(
    [
      route('same', { hostnames: ['*.example.com'], rules: [{ backendRefs: backend }] }, 'shop', younger),
      grpcRoute('same', { hostnames: ['rpc.example.com'], rules: [{ backendRefs: backend }] }, 'shop', older),
      // No hostname overlap with the GRPCRoute: both kinds attach to one listener.
      route('web', { hostnames: ['web.test'], rules: [{ backendRefs: backend }] }, 'shop', younger),
    ],
    listeners,
  );
  const accepted = (key: string) =>
    t
      .routeStatus()
      .get(key)!
      .map((p) => `${p.conditions[0]!.status}/${p.conditions[0]!.reason}`);
  assert.deepEqual(accepted('GRPCRoute shop/same'), ['True/Accepted']);
  assert.deepEqual(accepted('HTTPRoute shop/same'), ['False/NotAllowedByListeners']);
  assert.deepEqual(accepted('HTTPRoute shop/web'), ['True/Accepted']);
  assert.equal(pick(t, 'a.example.com', '/'), undefined, 'nothing of the rejected route is served');
  assert.equal(pick(t, 'rpc.example.com', '/'), 'shop/same#0');
  assert.deepEqual(
    [t.attachedRoutes('HTTPRoute'), t.attachedRoutes('GRPCRoute')],
    [2, 2],
    'each accepted route on both listeners',
  );
  // The same two routes, the HTTPRoute now the older: it wins and the GRPCRoute is rejected.
  const swapped = tableOf(
    [
      route('same', { hostnames: ['*.example.com'], rules: [{ backendRefs: backend }] }, 'shop', older),
      grpcRoute(
        'same',
        { hostnames: ['rpc.example.com'], rules: [{ backendRefs: backend }] },
        'shop',
        younger,
      ),
    ],
    listeners,
  );
  assert.equal(swapped.routeStatus().get('GRPCRoute shop/same')![0]!.conditions[0]!.status, 'False');
  assert.equal(pick(swapped, 'rpc.example.com', '/'), 'shop/same#0');
  assert.equal(swapped.routes().get('HTTPRoute shop/same')?.kind, 'HTTPRoute');
});

test('listeners take both route kinds unless allowedRoutes narrows them', () => {
  const t = tableOf(
    [grpcRoute('rpc', { rules: [{ backendRefs: backend }] })],
    [
      httpListener(),
      httpListener({ name: 'http-only', port: 8080, allowedRoutes: { kinds: [{ kind: 'HTTPRoute' }] } }),
    ],
  );
  const ls = Object.fromEntries(t.listenerStatus('infra/edge').map((l) => [l.name, l]));
  assert.deepEqual(
    ls.http!.supportedKinds.map((k) => k.kind),
    ['HTTPRoute', 'GRPCRoute'],
  );
  assert.deepEqual(
    ls['http-only']!.supportedKinds.map((k) => k.kind),
    ['HTTPRoute'],
  );
  assert.deepEqual([ls.http!.attachedRoutes, ls['http-only']!.attachedRoutes], [1, 0]);
});

test('under one host, GRPCRoute matches are tried before HTTPRoute ones (two listeners on one port)', () => {
  // Two listeners of one Gateway without hostnames: no conflict is settled across listeners.
  const t = tableOf(
    [
      route('web', {
        parentRefs: [{ name: 'edge', namespace: 'infra', sectionName: 'a' }],
        rules: [{ matches: [{ path: { type: 'Exact', value: `/${ECHO}/Echo` } }], backendRefs: backend }],
      }),
      grpcRoute('rpc', {
        parentRefs: [{ name: 'edge', namespace: 'infra', sectionName: 'b' }],
        rules: [method(ECHO, undefined)],
      }),
    ],
    [httpListener({ name: 'a' }), httpListener({ name: 'b' })],
  );
  assert.equal(pick(t, 'any.host', `/${ECHO}/Echo`), 'shop/rpc#0');
  assert.equal(pick(t, 'any.host', '/other.Svc/Echo'), undefined);
});
