import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pickBackend, type RouteBackend } from '../../../src/routes/backends.ts';
import {
  modifyHeaders,
  modifyPath,
  planFilters,
  redirectTo,
  type Headers,
} from '../../../src/routes/filters.ts';
import { slimHTTPRoute } from '../../../src/routes/objects.ts';

test('header modifiers: set replaces, add appends with a comma, remove deletes, any case', () => {
  const h: Headers = { 'x-set': 'old', 'x-add': 'a', 'x-gone': '1', keep: 'k' };
  modifyHeaders(h, {
    set: [
      { name: 'X-Set', value: 'new' },
      { name: 'X-New', value: 'n' },
    ],
    add: [
      { name: 'X-Add', value: 'b' },
      { name: 'X-Fresh', value: 'f' },
    ],
    remove: ['X-GONE'],
  });
  assert.deepEqual(h, { 'x-set': 'new', 'x-new': 'n', 'x-add': 'a,b', 'x-fresh': 'f', keep: 'k' });
});

test('path modifiers replace the full path or the matched prefix by whole elements', () => {
  const prefix = (path: string, p: string, r: string) =>
    modifyPath(path, { type: 'ReplacePrefixMatch', replacePrefixMatch: r }, p);
  assert.equal(prefix('/prefix/one/two', '/prefix/one', '/one'), '/one/two');
  assert.equal(prefix('/prefix/one', '/prefix/one', '/one'), '/one');
  assert.equal(prefix('/prefix/one/', '/prefix/one', '/one'), '/one/');
  assert.equal(prefix('/strip-prefix/three', '/strip-prefix', '/'), '/three');
  assert.equal(prefix('/strip-prefix', '/strip-prefix', '/'), '/');
  assert.equal(prefix('/a/b', '/a/', '/x/'), '/x/b');
  assert.equal(prefix('/anything', '/', '/base'), '/base/anything');
  assert.equal(modifyPath('/a?b', { type: 'ReplaceFullPath', replaceFullPath: '/full' }, undefined), '/full');
});

test('redirects keep what they do not set, and leave a well-known port out', () => {
  const line = {
    scheme: 'http' as const,
    host: 'example.com',
    path: '/a/b',
    search: '?q=1',
    listenerPort: 80,
  };
  assert.deepEqual(redirectTo({ statusCode: 302 }, line, undefined), {
    status: 302,
    location: 'http://example.com/a/b?q=1',
  });
  assert.equal(
    redirectTo({ scheme: 'https', statusCode: 301 }, line, undefined).location,
    'https://example.com/a/b?q=1',
  );
  assert.equal(
    redirectTo({ hostname: 'x.org', statusCode: 302 }, { ...line, listenerPort: 8080 }, undefined).location,
    'http://x.org:8080/a/b?q=1',
  );
  assert.equal(
    redirectTo({ scheme: 'https', port: 8443, statusCode: 302 }, line, undefined).location,
    'https://example.com:8443/a/b?q=1',
  );
  assert.equal(
    redirectTo(
      { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/z' }, statusCode: 302 },
      line,
      '/a',
    ).location,
    'http://example.com/z/b?q=1',
  );
});

test('a filter list plans the first redirect and every edit in order', () => {
  const r = slimHTTPRoute({
    spec: {
      rules: [
        {
          filters: [
            { type: 'RequestHeaderModifier', requestHeaderModifier: { set: [{ name: 'a', value: '1' }] } },
            { type: 'URLRewrite', urlRewrite: { hostname: 'h' } },
            { type: 'ResponseHeaderModifier', responseHeaderModifier: { remove: ['server'] } },
            { type: 'RequestRedirect', requestRedirect: { scheme: 'https' } },
            { type: 'RequestRedirect', requestRedirect: { scheme: 'http' } },
          ],
        },
      ],
    },
  });
  const plan = planFilters(r.spec.rules[0]!.filters);
  assert.equal(plan.request.length, 1);
  assert.deepEqual(plan.rewrite, [{ hostname: 'h' }]);
  assert.deepEqual(plan.response[0]!.remove, ['server']);
  assert.deepEqual(plan.redirect, { scheme: 'https', statusCode: 302 }, 'the API default status is 302');
});

test('weights: each backend gets its share; all zero picks none', () => {
  const b = (weight: number, name: string): RouteBackend => ({
    weight,
    filters: [],
    target: { namespace: 'n', name, port: { number: 80 } },
  });
  const backends = [b(70, 'v1'), b(0, 'off'), b(30, 'v2')];
  const counts = new Map<string, number>();
  for (let i = 0; i < 100; i++) {
    const chosen = pickBackend(backends, () => i / 100);
    const name = chosen && 'target' in chosen ? chosen.target.name : 'none';
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  assert.deepEqual(Object.fromEntries(counts), { v1: 70, v2: 30 });
  assert.equal(
    pickBackend([b(0, 'a'), b(0, 'b')], () => 0.5),
    undefined,
  );
  assert.equal(
    pickBackend([], () => 0.5),
    undefined,
  );
});

test('slimming fills the API defaults and is idempotent', () => {
  const r = slimHTTPRoute(
    { metadata: { name: 'r' }, spec: { rules: [{ backendRefs: [{ name: 's', port: 80 }] }] } },
    'ns',
  );
  assert.deepEqual(r.spec.rules[0]!.matches, [
    { path: { type: 'PathPrefix', value: '/' }, headers: [], queryParams: [] },
  ]);
  assert.deepEqual(r.spec.rules[0]!.backendRefs[0], {
    group: '',
    kind: 'Service',
    name: 's',
    port: 80,
    weight: 1,
    filters: [],
  });
  assert.equal(r.metadata.namespace, 'ns');
  assert.deepEqual(slimHTTPRoute(JSON.parse(JSON.stringify(r))), r);
});
