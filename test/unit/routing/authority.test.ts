import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseServiceName, splitHostPort } from '../../../src/routing/authority.ts';

test('splitHostPort handles names, ports, IPv4 and bracketed IPv6', () => {
  assert.deepEqual(splitHostPort('Web.Prod:8080'), { host: 'web.prod', port: 8080 });
  assert.deepEqual(splitHostPort('web.'), { host: 'web' });
  assert.deepEqual(splitHostPort('10.96.0.10:53'), { host: '10.96.0.10', port: 53 });
  assert.deepEqual(splitHostPort('[fd00::1]:80'), { host: 'fd00::1', port: 80 });
  assert.deepEqual(splitHostPort('[fd00::1]'), { host: 'fd00::1' });
  assert.deepEqual(splitHostPort('fd00::1'), { host: 'fd00::1' });
});

test('splitHostPort rejects malformed authorities', () => {
  for (const bad of [
    '',
    ':80',
    'web:0',
    'web:65536',
    'web:http',
    '[fd00::1',
    '[web]:80',
    'a b',
    'web:80:81',
    'we/b',
  ])
    assert.equal(splitHostPort(bad), undefined, bad);
});

const parse = (h: string) => parseServiceName(h, 'own', 'cluster.local');

test('parseServiceName accepts every form DNS in a pod resolves', () => {
  assert.deepEqual(parse('web'), { key: { namespace: 'own', name: 'web' } });
  assert.deepEqual(parse('web.prod'), { key: { namespace: 'prod', name: 'web' } });
  assert.deepEqual(parse('web.prod.svc'), { key: { namespace: 'prod', name: 'web' } });
  assert.deepEqual(parse('web.prod.svc.cluster.local'), { key: { namespace: 'prod', name: 'web' } });
  assert.deepEqual(parse('web.prod.svc.cluster.local.'), { key: { namespace: 'prod', name: 'web' } });
  assert.deepEqual(parse('db-0.db.prod.svc.cluster.local'), {
    key: { namespace: 'prod', name: 'db' },
    hostname: 'db-0',
  });
  assert.deepEqual(parse('db-0.db.prod.svc'), { key: { namespace: 'prod', name: 'db' }, hostname: 'db-0' });
  assert.deepEqual(parse('db-0.db.prod'), { key: { namespace: 'prod', name: 'db' }, hostname: 'db-0' });
});

test('parseServiceName honours a custom cluster domain and rejects other names', () => {
  assert.deepEqual(parseServiceName('web.prod.svc.corp.example', 'own', 'corp.example'), {
    key: { namespace: 'prod', name: 'web' },
  });
  assert.equal(parse('web.prod.svc.corp.example'), undefined);
  assert.equal(parse('10.0.0.1'), undefined);
  assert.equal(parse('a.b.c.d.e'), undefined);
  assert.equal(parse('web.prod.pod.cluster.local'), undefined);
  assert.equal(parse('-bad'), undefined);
  assert.equal(parse('under_score'), undefined);
  assert.equal(parse('x'.repeat(64)), undefined);
});
