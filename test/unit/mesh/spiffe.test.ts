import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  checkTrustDomain,
  formatSpiffeId,
  idFromServiceAccountUser,
  parseSpiffeId,
} from '../../../src/mesh/spiffe.ts';
import { allows } from '../../../src/mesh/allow-from.ts';
import { allowFrom, parseValue } from '../../../src/config/parse.ts';

const parseAllowFrom = (key: string, raw: string) => parseValue(allowFrom, key, raw, 'annotation');

test('a SPIFFE id round-trips through format and parse', () => {
  const id = { trustDomain: 'cluster.local', namespace: 'shop', serviceAccount: 'checkout.v2' };
  const uri = formatSpiffeId(id);
  assert.equal(uri, 'spiffe://cluster.local/ns/shop/sa/checkout.v2');
  assert.deepEqual(parseSpiffeId(uri), id);
});

test('ids that are not an Outrigger workload id parse to undefined', () => {
  for (const uri of [
    'spiffe://Cluster.local/ns/a/sa/b', // trust domains are lowercase
    'spiffe://td:8443/ns/a/sa/b', // no port
    'spiffe://td/ns/a/sa/b/extra',
    'spiffe://td/ns/A/sa/b',
    'spiffe://td/ns/a/sa/',
    'spiffe://td/ns/-a/sa/b',
    'https://td/ns/a/sa/b',
    'spiffe://td/sa/b/ns/a',
    `spiffe://td/ns/a/sa/${'b'.repeat(2100)}`,
  ])
    assert.equal(parseSpiffeId(uri), undefined, uri);
});

test('a TokenReview username maps to the id of its service account', () => {
  assert.deepEqual(idFromServiceAccountUser('td', 'system:serviceaccount:shop:web'), {
    trustDomain: 'td',
    namespace: 'shop',
    serviceAccount: 'web',
  });
  for (const u of ['system:node:n1', 'alice', 'system:serviceaccount:shop', 'system:serviceaccount:Shop:web'])
    assert.equal(idFromServiceAccountUser('td', u), undefined, u);
});

test('checkTrustDomain names the key, the value and what is allowed', () => {
  assert.equal(checkTrustDomain('--trust-domain', 'mesh.example.com'), 'mesh.example.com');
  assert.throws(
    () => checkTrustDomain('--trust-domain', 'Mesh/1'),
    /invalid flag --trust-domain="Mesh\/1": expected 1-255 characters/,
  );
});

test('allow-from parses namespace/sa and namespace/* entries', () => {
  const rules = parseAllowFrom('outrigger.dev/allow-from', ' shop/checkout, monitoring/* ,');
  assert.deepEqual(rules, [
    { namespace: 'shop', serviceAccount: 'checkout' },
    { namespace: 'monitoring', serviceAccount: '*' },
  ]);
  assert.deepEqual(parseAllowFrom('k', ''), []);
});

test('allow-from rejects malformed entries with the key, value and the allowed form', () => {
  for (const bad of ['shop', 'shop/', '*/web', 'shop/web/x', 'Shop/web', 'shop/we b', 'shop/*x'])
    assert.throws(
      () => parseAllowFrom('outrigger.dev/allow-from', bad),
      (e: Error) =>
        e.message.includes(`invalid annotation outrigger.dev/allow-from=${JSON.stringify(bad)}`) &&
        e.message.includes('namespace/serviceaccount or namespace/*'),
      bad,
    );
});

test('allow-from matches the namespace and service account within the own trust domain only', () => {
  const rules = parseAllowFrom('k', 'shop/checkout,monitoring/*');
  const id = (namespace: string, serviceAccount: string, trustDomain = 'td') => ({
    trustDomain,
    namespace,
    serviceAccount,
  });
  assert.equal(allows(rules, 'td', id('shop', 'checkout')), true);
  assert.equal(allows(rules, 'td', id('shop', 'web')), false);
  assert.equal(allows(rules, 'td', id('monitoring', 'anything')), true);
  assert.equal(allows(rules, 'td', id('monitoring', 'x', 'other-td')), false);
  assert.equal(allows(rules, 'td', undefined), false, 'a plaintext caller has no identity');
  assert.equal(allows([], 'td', undefined), true, 'no rules: no restriction');
});
