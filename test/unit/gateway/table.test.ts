import assert from 'node:assert/strict';
import { test } from 'node:test';
import { slimIngress } from '../../../src/gateway/objects.ts';
import { RouteTable, normalizeHost } from '../../../src/gateway/table.ts';
import { ingress, type PathSpec } from './ingress-fixtures.ts';

/** Which Service answers host+path: the Service name, or '404'. */
function where(t: RouteTable, host: string, path: string): string {
  return t.lookup(host, path)?.backend.name ?? '404';
}

const table = (paths: PathSpec[], host?: string): RouteTable =>
  new RouteTable([ingress({ name: 'ing', rules: [{ ...(host ? { host } : {}), paths }] })]);

// kubernetes.io/docs/concepts/services-networking/ingress/ "Examples" table, row by row.
const specExamples: { rules: PathSpec[]; request: string; want: string }[] = [
  { rules: [{ path: '/', svc: 'root' }], request: '/', want: 'root' },
  { rules: [{ path: '/', svc: 'root' }], request: '/anything/at/all', want: 'root' },
  { rules: [{ path: '/foo', type: 'Exact', svc: 'foo' }], request: '/foo', want: 'foo' },
  { rules: [{ path: '/foo', type: 'Exact', svc: 'foo' }], request: '/bar', want: '404' },
  { rules: [{ path: '/foo', type: 'Exact', svc: 'foo' }], request: '/foo/', want: '404' },
  { rules: [{ path: '/foo/', type: 'Exact', svc: 'foo' }], request: '/foo', want: '404' },
  { rules: [{ path: '/foo', svc: 'foo' }], request: '/foo', want: 'foo' },
  { rules: [{ path: '/foo', svc: 'foo' }], request: '/foo/', want: 'foo' },
  { rules: [{ path: '/foo/', svc: 'foo' }], request: '/foo', want: 'foo' },
  { rules: [{ path: '/foo/', svc: 'foo' }], request: '/foo/', want: 'foo' },
  { rules: [{ path: '/aaa/bb', svc: 'a' }], request: '/aaa/bbb', want: '404' },
  { rules: [{ path: '/aaa/bbb', svc: 'a' }], request: '/aaa/bbb', want: 'a' },
  { rules: [{ path: '/aaa/bbb/', svc: 'a' }], request: '/aaa/bbb', want: 'a' },
  { rules: [{ path: '/aaa/bbb', svc: 'a' }], request: '/aaa/bbb/', want: 'a' },
  { rules: [{ path: '/aaa/bbb', svc: 'a' }], request: '/aaa/bbb/ccc', want: 'a' },
  { rules: [{ path: '/aaa/bbb', svc: 'a' }], request: '/aaa/bbbxyz', want: '404' },
  {
    rules: [
      { path: '/', svc: 'root' },
      { path: '/aaa', svc: 'aaa' },
    ],
    request: '/aaa/ccc',
    want: 'aaa',
  },
  {
    rules: [
      { path: '/', svc: 'root' },
      { path: '/aaa', svc: 'aaa' },
      { path: '/aaa/bbb', svc: 'bbb' },
    ],
    request: '/aaa/bbb',
    want: 'bbb',
  },
  {
    rules: [
      { path: '/', svc: 'root' },
      { path: '/aaa', svc: 'aaa' },
    ],
    request: '/ccc',
    want: 'root',
  },
  { rules: [{ path: '/aaa', svc: 'aaa' }], request: '/ccc', want: '404' },
  {
    rules: [
      { path: '/foo', svc: 'prefix' },
      { path: '/foo', type: 'Exact', svc: 'exact' },
    ],
    request: '/foo',
    want: 'exact',
  },
  {
    rules: [
      { path: '/foo', type: 'Exact', svc: 'exact' },
      { path: '/foo', svc: 'prefix' },
    ],
    request: '/foo',
    want: 'exact',
  },
];

for (const [i, ex] of specExamples.entries()) {
  const rules = ex.rules.map((r) => `${r.type ?? 'Prefix'} ${r.path}`).join(' + ');
  test(`Ingress spec example ${i + 1}: ${rules}, request ${ex.request} -> ${ex.want}`, () => {
    assert.equal(where(table(ex.rules), 'example.com', ex.request), ex.want);
  });
}

// ingress-controller-conformance path_rules.feature, the cases not already above.
test('path matching is case-sensitive for Exact and Prefix', () => {
  const t = table([
    { path: '/exact', type: 'Exact', svc: 'exact' },
    { path: '/aaa', svc: 'aaa' },
  ]);
  assert.equal(where(t, 'h', '/Exact'), '404');
  assert.equal(where(t, 'h', '/AAA'), '404');
  assert.equal(where(t, 'h', '/aaaccc'), '404');
});

test('an Exact path beats a longer-looking Prefix only on the same path; deeper Prefix paths win', () => {
  const t = table([
    { path: '/foo', type: 'Exact', svc: 'exact' },
    { path: '/foo/', svc: 'prefix-slash' },
    { path: '/foo/bar', svc: 'deeper' },
  ]);
  assert.equal(where(t, 'h', '/foo'), 'exact');
  assert.equal(where(t, 'h', '/foo/'), 'prefix-slash');
  assert.equal(where(t, 'h', '/foo/bar/x'), 'deeper');
  assert.equal(where(t, 'h', '/foo/baz'), 'prefix-slash');
});

test('of Prefix /foo and /foo/ the one with the slash wins, whatever the order', () => {
  for (const order of [
    ['/foo', '/foo/'],
    ['/foo/', '/foo'],
  ]) {
    const t = table(order.map((p) => ({ path: p, svc: p === '/foo' ? 'plain' : 'slash' })));
    assert.equal(where(t, 'h', '/foo/x'), 'slash', order.join(','));
  }
});

test('ImplementationSpecific is Prefix', () => {
  const t = table([{ path: '/app', type: 'ImplementationSpecific', svc: 'app' }]);
  assert.equal(where(t, 'h', '/app/x'), 'app');
  assert.equal(where(t, 'h', '/apps'), '404');
  assert.equal(t.lookup('h', '/app')?.pathType, 'Prefix');
});

test('the path is matched element-wise without decoding; an empty element is an element', () => {
  const t = table([{ path: '/a/b', svc: 'ab' }]);
  assert.equal(where(t, 'h', '/a//b'), '404');
  assert.equal(where(t, 'h', '/a%2Fb'), '404');
  assert.equal(where(t, 'h', '/a/b'), 'ab');
});

// Hosts (kubernetes.io docs "Hostname wildcards"; conformance host_rules.feature).
test('hosts: precise, one-label wildcard, host-less, with port and trailing dot', () => {
  const t = new RouteTable([
    ingress({
      name: 'hosts',
      rules: [
        { host: 'foo.bar.com', paths: [{ path: '/', svc: 'precise' }] },
        { host: '*.foo.com', paths: [{ path: '/', svc: 'wild' }] },
        { paths: [{ path: '/', svc: 'any' }] },
      ],
    }),
  ]);
  const cases: [string, string][] = [
    ['foo.bar.com', 'precise'],
    ['FOO.bar.COM', 'precise'],
    ['foo.bar.com:8443', 'precise'],
    ['foo.bar.com.', 'precise'],
    ['bar.foo.com', 'wild'],
    ['baz.bar.foo.com', 'any'],
    ['foo.com', 'any'],
    ['other.example', 'any'],
    ['[::1]:80', 'any'],
    ['10.0.0.1', 'any'],
  ];
  for (const [host, want] of cases) assert.equal(where(t, host, '/x'), want, host);
});

test('a precise host wins over a wildcard that also matches it', () => {
  const t = new RouteTable([
    ingress({ name: 'w', rules: [{ host: '*.example.com', paths: [{ path: '/', svc: 'wild' }] }] }),
    ingress({ name: 'p', rules: [{ host: 'api.example.com', paths: [{ path: '/', svc: 'precise' }] }] }),
  ]);
  assert.equal(where(t, 'api.example.com', '/'), 'precise');
  assert.equal(where(t, 'web.example.com', '/'), 'wild');
});

test('a host with rules owns its paths: no fall-through to the host-less rules', () => {
  const t = new RouteTable([
    ingress({
      name: 'i',
      rules: [
        { host: 'foo.com', paths: [{ path: '/api', svc: 'api' }] },
        { paths: [{ path: '/', svc: 'any' }] },
      ],
    }),
  ]);
  assert.equal(where(t, 'foo.com', '/api/v1'), 'api');
  assert.equal(where(t, 'foo.com', '/web'), '404');
  assert.equal(where(t, 'bar.com', '/web'), 'any');
});

test('defaultBackend: the host default of its own hosts, and the catch-all of an Ingress without rules', () => {
  const t = new RouteTable([
    ingress({
      name: 'shop',
      created: '2026-01-01T00:00:00Z',
      rules: [{ host: 'shop.com', paths: [{ path: '/cart', svc: 'cart' }] }],
      defaultBackend: { svc: 'shop-default' },
    }),
    ingress({ name: 'catch-all', created: '2026-01-02T00:00:00Z', defaultBackend: { svc: 'catch-all' } }),
    ingress({ name: 'blog', rules: [{ host: 'blog.com', paths: [{ path: '/posts', svc: 'posts' }] }] }),
  ]);
  assert.equal(where(t, 'shop.com', '/cart'), 'cart');
  assert.equal(where(t, 'shop.com', '/other'), 'shop-default');
  assert.equal(where(t, 'blog.com', '/other'), 'catch-all');
  assert.equal(where(t, 'unknown.com', '/'), 'catch-all');
  assert.equal(t.lookup('unknown.com', '/')?.pathType, 'DefaultBackend');
});

test('conformance default_backend: a defaultBackend-only Ingress answers every host and path', () => {
  const t = new RouteTable([ingress({ name: 'd', defaultBackend: { svc: 'echo', port: 'http' } })]);
  for (const [host, path] of [
    ['foo.com', '/'],
    ['bar.org', '/some/path'],
    ['10.1.2.3', '/x?y=1'],
  ] as const)
    assert.equal(where(t, host, path), 'echo');
  assert.deepEqual(t.lookup('a', '/')?.backend, {
    namespace: 'default',
    name: 'echo',
    port: { name: 'http' },
  });
});

test('backends keep the Service port by name or number and the Ingress namespace', () => {
  const t = new RouteTable([
    ingress({
      name: 'i',
      namespace: 'shop',
      rules: [
        {
          paths: [
            { path: '/n', svc: 'web', port: 8080 },
            { path: '/s', svc: 'web', port: 'http' },
          ],
        },
      ],
    }),
  ]);
  assert.deepEqual(t.lookup('h', '/n')?.backend, { namespace: 'shop', name: 'web', port: { number: 8080 } });
  assert.deepEqual(t.lookup('h', '/s')?.backend, { namespace: 'shop', name: 'web', port: { name: 'http' } });
  assert.deepEqual([...t.services()], ['shop/web']);
});

test('conflicts: the oldest Ingress wins, then namespace/name; input order does not matter', () => {
  const a = ingress({
    name: 'b-newer',
    created: '2026-02-01T00:00:00Z',
    rules: [{ host: 'x.com', paths: [{ path: '/p', svc: 'newer' }] }],
  });
  const b = ingress({
    name: 'a-older',
    created: '2026-01-01T00:00:00Z',
    rules: [{ host: 'x.com', paths: [{ path: '/p', svc: 'older' }] }],
  });
  const sameAgeA = ingress({ name: 'aaa', rules: [{ host: 'y.com', paths: [{ path: '/', svc: 'aaa' }] }] });
  const sameAgeZ = ingress({ name: 'zzz', rules: [{ host: 'y.com', paths: [{ path: '/', svc: 'zzz' }] }] });
  for (const order of [
    [a, b, sameAgeZ, sameAgeA],
    [b, a, sameAgeA, sameAgeZ],
  ]) {
    const t = new RouteTable(order);
    assert.equal(where(t, 'x.com', '/p'), 'older');
    assert.equal(where(t, 'y.com', '/'), 'aaa');
    assert.equal(t.problems.length, 2);
    assert.ok(t.problems.some((p) => p.ingress === 'default/b-newer'));
  }
});

test('two Ingresses with different paths for one host are merged', () => {
  const t = new RouteTable([
    ingress({ name: 'one', rules: [{ host: 'x.com', paths: [{ path: '/a', svc: 'a' }] }] }),
    ingress({ name: 'two', rules: [{ host: 'x.com', paths: [{ path: '/b', svc: 'b' }] }] }),
  ]);
  assert.equal(where(t, 'x.com', '/a'), 'a');
  assert.equal(where(t, 'x.com', '/b'), 'b');
  assert.equal(t.routes, 2);
});

test('invalid hosts and paths and resource backends are skipped and reported', () => {
  const raw = {
    metadata: { name: 'bad', namespace: 'default' },
    spec: {
      rules: [
        {
          host: 'bad_host!',
          http: {
            paths: [
              { path: '/', pathType: 'Prefix', backend: { service: { name: 's', port: { number: 80 } } } },
            ],
          },
        },
        {
          http: {
            paths: [
              {
                path: 'relative',
                pathType: 'Prefix',
                backend: { service: { name: 's', port: { number: 80 } } },
              },
              {
                path: '/bucket',
                pathType: 'Prefix',
                backend: { resource: { apiGroup: 'k8s.example.com', kind: 'StorageBucket', name: 'b' } },
              },
              { path: '/nopathtype', backend: { service: { name: 's', port: { number: 80 } } } },
            ],
          },
        },
      ],
    },
  };
  const t = new RouteTable([slimIngress(raw)]);
  assert.equal(t.routes, 0);
  assert.equal(t.problems.length, 3);
  assert.match(
    t.problems.map((p) => p.message).join('\n'),
    /not a valid Ingress host[\s\S]*start with "\/"[\s\S]*resource backends/,
  );
});

test('TLS: Secrets by host, wildcard hosts, the oldest Ingress wins a host', () => {
  const t = new RouteTable([
    ingress({
      name: 'new',
      created: '2026-03-01T00:00:00Z',
      tls: [{ hosts: ['a.com'], secretName: 'new-a' }],
    }),
    ingress({
      name: 'old',
      namespace: 'web',
      created: '2026-01-01T00:00:00Z',
      tls: [{ hosts: ['a.com', '*.b.com'], secretName: 'old-ab' }, { hosts: ['sni-only.com'] }],
    }),
  ]);
  assert.equal(t.tlsFor('a.com')?.secret, 'web/old-ab');
  assert.equal(t.tlsFor('x.b.com')?.secret, 'web/old-ab');
  assert.equal(t.tlsFor('y.x.b.com'), undefined);
  assert.equal(t.tlsFor('sni-only.com'), undefined);
  assert.deepEqual([...t.tlsSecrets()].sort(), ['web/old-ab']);
  // Another namespace's: the host is web's, so default/new's Secret is not served for it.
  assert.ok(t.problems.some((p) => p.ingress === 'default/new' && p.conflict?.kind === 'host'));
});

test('normalizeHost', () => {
  assert.equal(normalizeHost('Example.COM:8080'), 'example.com');
  assert.equal(normalizeHost('example.com.'), 'example.com');
  assert.equal(normalizeHost('[::1]:443'), '[::1]');
  assert.equal(normalizeHost(''), '');
});

test('lookup work does not grow with the number of rules (the trie is probed, not scanned)', () => {
  // 10,000 hosts x 5 paths: a linear scan would visit 50,000 rules; the lookup probes a handful of
  // Map entries. Checked by counting Map.get calls made by one lookup, not by timing.
  const ings = [];
  for (let i = 0; i < 10_000; i++)
    ings.push(
      ingress({
        name: `i${i}`,
        rules: [
          {
            host: `h${i}.example.com`,
            paths: ['/a', '/b', '/c/d', '/e', '/f'].map((p) => ({ path: p, svc: `s${i}` })),
          },
        ],
      }),
    );
  const t = new RouteTable(ings);
  assert.equal(t.routes, 50_000);
  type Get = (this: Map<unknown, unknown>, k: unknown) => unknown;
  const original = Object.getOwnPropertyDescriptor(Map.prototype, 'get') as PropertyDescriptor;
  const get = original.value as Get;
  let calls = 0;
  const counting: Get = function (k) {
    calls++;
    return get.call(this, k);
  };
  Object.defineProperty(Map.prototype, 'get', { ...original, value: counting });
  try {
    assert.equal(where(t, 'h9999.example.com', '/c/d/e'), 's9999');
  } finally {
    Object.defineProperty(Map.prototype, 'get', original);
  }
  assert.ok(calls >= 1 && calls <= 6, `${calls} Map lookups`);
});
