import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Issuer } from '../../../src/mesh/issuer.ts';
import type { CertificateRequester } from '../../../src/mesh/issuer-client.ts';
import { WorkloadIdentity } from '../../../src/mesh/workload-identity.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { OutriggerError } from '../../../src/shared/errors.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { FakeReviewer, fakeSaToken, testCa, until } from '../../harness/mesh.ts';

const log = createLogger({ write: () => {} });
const ID = 'spiffe://cluster.local/ns/shop/sa/web';
const HOUR = 3600_000;

/** A real Issuer (real signing) on the fake clock, behind a switch that can make it unreachable. */
async function world(t: { after(fn: () => void): void }, ttlMs = 24 * HOUR) {
  const clock = new FakeClock(Date.now());
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-wid-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  const tokenFile = join(dir, 'token');
  const reviewer = new FakeReviewer();
  const setToken = (n: number): void =>
    writeFileSync(tokenFile, reviewer.podToken(fakeSaToken('shop', 'web', n), 'shop', 'web'));
  setToken(0);
  const issuer = new Issuer({
    ca: await testCa(clock.now()),
    reviewer,
    trustDomain: 'cluster.local',
    audience: 'outrigger-identity',
    ttlMs,
    clock,
    log,
    requireBoundPod: true,
  });
  const state = { down: false, tokens: [] as string[] };
  const request: CertificateRequester = async (token, csr) => {
    state.tokens.push(token);
    if (state.down) throw new OutriggerError('identity_unavailable', 'connect ECONNREFUSED');
    const c = await issuer.certify(token, csr);
    return { ...c };
  };
  const make = (random = () => 0) => {
    const id = new WorkloadIdentity({
      trustDomain: 'cluster.local',
      tokenFile,
      storeDir: join(dir, 'store'),
      request,
      clock,
      random,
      log,
    });
    t.after(() => id.close());
    return id;
  };
  return { clock, state, make, setToken };
}

test('start-up asks the issuer, and renewal comes at 70 % of the lifetime with a fresh key', async (t) => {
  const { clock, make } = await world(t);
  const id = make(() => 0); // no jitter: exactly 70 %
  await id.start();
  const first = id.current();
  assert.ok(first);
  assert.equal(new X509Certificate(first.certificate).subjectAltName, `URI:${ID}`);
  const s = id.status();
  assert.equal(s.source, 'issuer');
  const lifetime = first.notAfter - first.notBefore;
  assert.equal(Date.parse(s.renewAt ?? ''), first.notBefore + Math.round(lifetime * 0.7));

  await clock.advance(Date.parse(s.renewAt ?? '') - clock.now() - 1000);
  assert.equal(id.status().renewals, 1, 'not before the renewal point');
  await clock.advance(1000);
  await until('the renewal', () => id.status().renewals === 2);
  const second = id.current();
  assert.ok(second && second.notAfter > first.notAfter);
  assert.ok(!second.key.equals(first.key), 'each renewal uses a new key');
});

test('jitter moves renewal earlier by at most 10 % of the 70 % point', async (t) => {
  const { make } = await world(t);
  const id = make(() => 0.999);
  await id.start();
  const c = id.current();
  assert.ok(c);
  const at = Date.parse(id.status().renewAt ?? '');
  const lifetime = c.notAfter - c.notBefore;
  assert.ok(at >= c.notBefore + lifetime * 0.63 - 1 && at < c.notBefore + lifetime * 0.64, `${at}`);
});

test('a failed renewal keeps the certificate and retries before it expires', async (t) => {
  const { clock, state, make } = await world(t, 60_000);
  const id = make();
  await id.start();
  const first = id.current();
  assert.ok(first);
  state.down = true;
  await clock.advance(Date.parse(id.status().renewAt ?? '') - clock.now());
  await until('a failed attempt', () => id.status().renewalFailures >= 1);
  assert.equal(id.current(), first, 'the old certificate is still served');
  assert.ok(id.status().lastError?.includes('ECONNREFUSED'));
  assert.ok(id.metrics().outrigger_identity_renewal_failures_total?.value ?? 0 >= 1);
  const retryIn = Date.parse(id.status().renewAt ?? '') - clock.now();
  assert.ok(retryIn >= 1000 && retryIn <= (first.notAfter - clock.now()) / 3, `retry in ${retryIn} ms`);
  state.down = false;
  await clock.advance(retryIn);
  await until('the renewal after the outage', () => id.status().renewals === 2);
  assert.notEqual(id.current(), first);
  assert.equal(id.status().lastError, undefined);
});

test('the token file is read again for every request (the kubelet rotates it)', async (t) => {
  const { clock, state, make, setToken } = await world(t);
  const id = make();
  await id.start();
  setToken(1);
  await clock.advance(Date.parse(id.status().renewAt ?? '') - clock.now());
  await until('the renewal', () => id.status().renewals === 2);
  assert.equal(state.tokens.length, 2);
  assert.notEqual(state.tokens[0], state.tokens[1]);
});

test('a sidecar restarted while the issuer is down keeps its stored identity until it expires', async (t) => {
  const { clock, state, make } = await world(t, 2 * HOUR);
  const before = make();
  await before.start();
  const issued = before.current();
  assert.ok(issued);
  before.close();

  state.down = true;
  const after = make();
  await after.start();
  const stored = after.current();
  assert.ok(stored, 'ready from the store, without the issuer');
  assert.equal(after.status().source, 'stored');
  assert.equal(stored.certificate, issued.certificate);
  assert.ok(stored.key.equals(issued.key));
  assert.equal(state.tokens.length, 1, 'no request at start-up');

  // Past expiry with the issuer still down: no identity any more, and not ready.
  await clock.advance(issued.notAfter - clock.now() + 1000);
  assert.equal(after.current(), undefined);
  assert.equal(after.status().ready, false);
  assert.equal(after.metrics().outrigger_identity_ready?.value, 0);

  // A restart now finds only an expired certificate: it asks the issuer (down) and is not ready.
  const third = make();
  await third.start();
  assert.equal(third.current(), undefined);
  assert.equal(third.status().source, 'none');
  assert.ok(third.status().renewalFailures >= 1);
});

test('a token that is not a service-account token stops the start with a clear error', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-wid-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'token'), 'not-a-jwt');
  const id = new WorkloadIdentity({
    trustDomain: 'cluster.local',
    tokenFile: join(dir, 'token'),
    storeDir: join(dir, 'store'),
    request: () => Promise.reject(new Error('unused')),
    clock: new FakeClock(),
    random: () => 0,
    log,
  });
  await assert.rejects(id.start(), /is not a service-account token/);
});
