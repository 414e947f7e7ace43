// When `outrigger install` keeps the installed webhook certificate and when it issues a new one
// (the cluster side is in test/integration/cli-install-check.test.ts).
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { test } from 'node:test';
import { planWebhookTls, type TlsInput } from '../../../src/cli/install-tls.ts';

const DAY = 86_400_000;
const NOW = Date.parse('2026-06-01T00:00:00Z');
const SERVICE = ['outrigger-webhook.outrigger-system.svc', 'outrigger-webhook'];
const fresh = (o: Partial<TlsInput> = {}) =>
  planWebhookTls({ sans: SERVICE, rotate: false, days: 365, now: NOW, ...o });
const cas = (bundle: string): string[] =>
  (
    Buffer.from(bundle, 'base64')
      .toString()
      .match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? []
  ).map((p) => new X509Certificate(p).fingerprint256);

test('a usable installed certificate is kept byte for byte, with its caBundle', () => {
  const first = fresh();
  assert.equal(first.issued, 'no certificate is installed');
  const again = fresh({ existing: first.data, caBundle: first.caBundle, now: NOW + 300 * DAY });
  assert.equal(again.issued, undefined);
  assert.deepEqual(again.data, first.data);
  assert.equal(again.caBundle, first.caBundle);
});

test('a caBundle that drifted from the Secret is repaired from the Secret, keeping the certificate', () => {
  const first = fresh();
  const other = fresh();
  const again = fresh({ existing: first.data, caBundle: other.caBundle });
  assert.equal(again.issued, undefined);
  assert.equal(again.caBundle, first.data['ca.crt']);
});

test('a new certificate when asked, when it expires within 30 days, or when its names do not fit', () => {
  const first = fresh();
  const base = { existing: first.data, caBundle: first.caBundle };
  assert.equal(fresh({ ...base, rotate: true }).issued, '--rotate-certificate');
  assert.match(
    fresh({ ...base, now: NOW + 340 * DAY }).issued ?? '',
    /installed certificate expires on .* \(within 30 days\)/,
  );
  assert.equal(fresh({ ...base, now: NOW + 330 * DAY }).issued, undefined, '35 days left: kept');
  assert.match(
    fresh({ ...base, sans: ['127.0.0.1'] }).issued ?? '',
    /installed certificate is not valid for 127\.0\.0\.1/,
  );
  const swapped = { ...first.data, 'tls.key': fresh().data['tls.key'] };
  assert.match(fresh({ existing: swapped }).issued ?? '', /key does not match its certificate/);
});

test('a rotation keeps the previous CA in the caBundle, so the webhook is trusted until it reloads', () => {
  const first = fresh();
  const rotated = fresh({ existing: first.data, caBundle: first.caBundle, rotate: true });
  assert.deepEqual(cas(rotated.caBundle), [
    ...cas(rotated.data['ca.crt'] ?? ''),
    ...cas(first.data['ca.crt'] ?? ''),
  ]);
  // The next rotation drops it: only the CA of the certificate being replaced is kept.
  const twice = fresh({ existing: rotated.data, caBundle: rotated.caBundle, rotate: true });
  assert.equal(cas(twice.caBundle).length, 2);
  assert.ok(!cas(twice.caBundle).includes(cas(first.data['ca.crt'] ?? '')[0] ?? ''));
});
