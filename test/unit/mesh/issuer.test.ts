import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { KubeError } from '../../../src/kube/api.ts';
import { Issuer, refusalReason } from '../../../src/mesh/issuer.ts';
import { createCsr, generateP256 } from '../../../src/mesh/x509.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { isOutriggerError, type ErrorCode } from '../../../src/shared/errors.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { FakeReviewer, testCa } from '../../harness/mesh.ts';

const log = createLogger({ write: () => {} });
const ID = 'spiffe://cluster.local/ns/shop/sa/web';

async function setup(opts: { requireBoundPod?: boolean } = {}) {
  const clock = new FakeClock(Date.now());
  const ca = await testCa(clock.now());
  const reviewer = new FakeReviewer();
  const issuer = new Issuer({
    ca,
    reviewer,
    trustDomain: 'cluster.local',
    audience: 'outrigger-identity',
    ttlMs: 24 * 3600_000,
    clock,
    log,
    requireBoundPod: opts.requireBoundPod ?? true,
  });
  return { clock, ca, reviewer, issuer };
}

const refusedWith = (code: ErrorCode) => (e: unknown) => isOutriggerError(e, code);

test('a pod-bound token for our audience gets a 24 h SPIFFE certificate over the CSR key', async () => {
  const { clock, ca, reviewer, issuer } = await setup();
  const keys = await generateP256();
  const c = await issuer.certify(reviewer.podToken('t1', 'shop', 'web'), await createCsr(keys, ID));
  const cert = new X509Certificate(c.certificate);
  const root = new X509Certificate(ca.trustBundle);
  assert.equal(cert.subjectAltName, `URI:${ID}`);
  assert.equal(cert.subject, undefined, 'empty subject, as SPIFFE recommends');
  assert.equal(cert.ca, false);
  assert.ok(cert.verify(root.publicKey), 'signed by the CA');
  assert.ok(cert.checkIssued(root));
  assert.ok(cert.publicKey.equals(keys.publicKey), 'the key is the one in the CSR');
  assert.deepEqual(cert.keyUsage, ['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2'], 'serverAuth and clientAuth');
  assert.equal(c.notAfter, clock.now() + 24 * 3600_000);
  assert.ok(Date.parse(cert.validFrom) <= clock.now() - 19_000, 'backdated for clock skew');
  assert.equal(Math.abs(Date.parse(cert.validTo) - c.notAfter) < 1000, true);
  assert.equal(c.spiffeId, ID);
});

test('a CSR for another identity than the token proves is forbidden', async () => {
  const { reviewer, issuer } = await setup();
  const keys = await generateP256();
  const csr = await createCsr(keys, 'spiffe://cluster.local/ns/shop/sa/admin');
  await assert.rejects(
    issuer.certify(reviewer.podToken('t1', 'shop', 'web'), csr),
    refusedWith('identity_forbidden'),
  );
  const otherTd = await createCsr(keys, 'spiffe://evil.example/ns/shop/sa/web');
  await assert.rejects(issuer.certify('t1', otherTd), refusedWith('identity_forbidden'));
});

test('tokens the API server does not accept for our audience get no certificate', async () => {
  const { reviewer, issuer } = await setup();
  const csr = await createCsr(await generateP256(), ID);
  await assert.rejects(
    issuer.certify('unknown', csr),
    (e: unknown) =>
      refusedWith('identity_token_rejected')(e) && /invalid bearer token/.test((e as Error).message),
  );
  reviewer.podToken('wrong-aud', 'shop', 'web', 'https://kubernetes.default.svc');
  await assert.rejects(issuer.certify('wrong-aud', csr), refusedWith('identity_token_rejected'));
  // An API server that authenticates but does not echo our audience: refused all the same.
  reviewer.tokens.set('no-aud', {
    authenticated: true,
    username: 'system:serviceaccount:shop:web',
    audiences: [],
  });
  await assert.rejects(issuer.certify('no-aud', csr), refusedWith('identity_token_rejected'));
});

test('a user that is not a service account, or a token bound to no pod, gets nothing', async () => {
  const { reviewer, issuer } = await setup();
  const csr = await createCsr(await generateP256(), ID);
  reviewer.tokens.set('user', { authenticated: true, username: 'alice', audiences: ['outrigger-identity'] });
  await assert.rejects(issuer.certify('user', csr), refusedWith('identity_token_rejected'));
  reviewer.tokens.set('unbound', {
    authenticated: true,
    username: 'system:serviceaccount:shop:web',
    audiences: ['outrigger-identity'],
  });
  await assert.rejects(issuer.certify('unbound', csr), /not bound to a pod/);
});

test('a malformed CSR is refused before any TokenReview', async () => {
  const { reviewer, issuer } = await setup();
  reviewer.podToken('t1', 'shop', 'web');
  for (const csr of [
    '',
    'not pem',
    '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----',
  ])
    await assert.rejects(issuer.certify('t1', csr), refusedWith('identity_request_invalid'));
  assert.equal(reviewer.calls, 0);
});

test('an unreachable API server is a retryable refusal, not a crash', async () => {
  const { reviewer, issuer } = await setup();
  reviewer.failWith = new Error('connect ECONNREFUSED');
  const csr = await createCsr(await generateP256(), ID);
  await assert.rejects(issuer.certify('t1', csr), refusedWith('identity_review_unavailable'));
});

test('every refusal carries its reason, and TokenReview calls are observed', async () => {
  const { reviewer, clock } = await setup();
  const seen: { reviews: (string | undefined)[] } = { reviews: [] };
  const issuer = new Issuer({
    ca: await testCa(clock.now()),
    reviewer,
    trustDomain: 'cluster.local',
    audience: 'outrigger-identity',
    ttlMs: 3600_000,
    clock,
    log,
    requireBoundPod: true,
    observer: { issued: () => {}, refused: () => {}, reviewed: (_s, code) => seen.reviews.push(code) },
  });
  const keys = await generateP256();
  const csr = await createCsr(keys, ID);
  const reasonOf = (token: string, request = csr) =>
    issuer.certify(token, request).then(
      () => 'issued',
      (e: unknown) => refusalReason(e),
    );
  reviewer.tokens.set('expired', {
    authenticated: false,
    audiences: ['outrigger-identity'],
    error: '[invalid bearer token, token is expired]',
  });
  reviewer.podToken('api-aud', 'shop', 'web', 'https://kubernetes.default.svc');
  reviewer.tokens.set('no-aud', {
    authenticated: true,
    username: 'system:serviceaccount:shop:web',
    audiences: [],
  });
  reviewer.tokens.set('user', { authenticated: true, username: 'alice', audiences: ['outrigger-identity'] });
  reviewer.tokens.set('unbound', {
    authenticated: true,
    username: 'system:serviceaccount:shop:web',
    audiences: ['outrigger-identity'],
  });
  reviewer.podToken('ok', 'shop', 'web');
  assert.deepEqual(
    [
      await reasonOf('ok'),
      await reasonOf('expired'),
      await reasonOf('api-aud'),
      await reasonOf('no-aud'),
      await reasonOf('unknown'),
      await reasonOf('user'),
      await reasonOf('unbound'),
      await reasonOf('ok', await createCsr(keys, 'spiffe://cluster.local/ns/shop/sa/admin')),
      await reasonOf('ok', 'not pem'),
    ],
    [
      'issued',
      'token_expired',
      'bad_audience',
      'bad_audience',
      'token_not_authenticated',
      'not_service_account',
      'not_bound_to_pod',
      'csr_identity_mismatch',
      'request_invalid',
    ],
  );
  reviewer.failWith = new KubeError('kube_forbidden', 'HTTP 403');
  assert.equal(await reasonOf('ok'), 'review_unavailable');
  assert.equal(seen.reviews.length, 9, 'one review per request with a well-formed CSR');
  assert.deepEqual(seen.reviews.slice(-2), [undefined, 'kube_forbidden']);
});
