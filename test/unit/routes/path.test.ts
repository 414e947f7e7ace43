import assert from 'node:assert/strict';
import { test } from 'node:test';
import { normalisePath, removeDotSegments } from '../../../src/routes/path.ts';

test('dot-segments are removed as RFC 3986 section 5.2.4 says', () => {
  const cases: [string, string][] = [
    ['/a/b/c/./../../g', '/a/g'],
    ['/../../x', '/x'],
    ['/a/..', '/'],
    ['/a/.', '/a/'],
    ['/a/b/..', '/a/'],
    ['/a//b/../c', '/a//c'],
    ['/', '/'],
    ['/a..b/.c', '/a..b/.c'],
  ];
  for (const [path, want] of cases) assert.equal(removeDotSegments(path), want, path);
});

test('escaped unreserved characters are decoded, other escapes kept, slashes refused', () => {
  assert.deepEqual(normalisePath('/%7Euser/%2E%2e/%41b%20c'), { path: '/Ab%20c' });
  assert.deepEqual(normalisePath('/q%3Fx'), { path: '/q%3Fx' });
  assert.deepEqual(normalisePath('*'), { path: '*' });
  for (const bad of ['/a%2Fb', '/a%2fb', '/a%5cb', '/a\\b']) assert.ok('error' in normalisePath(bad), bad);
});
