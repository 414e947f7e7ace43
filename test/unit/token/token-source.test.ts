import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { inClusterServer } from '../../../src/token/in-cluster.ts';
import { jwtExpiry, openTokenSource } from '../../../src/token/token-source.ts';
import { isOutriggerError } from '../../../src/shared/errors.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const jwt = (exp: number, tag: string): string =>
  [
    Buffer.from('{"alg":"RS256"}').toString('base64url'),
    Buffer.from(JSON.stringify({ exp, sub: tag })).toString('base64url'),
    'sig-' + tag,
  ].join('.');

/** The kubelet AtomicWriter layout: files -> ..data/<file>, ..data -> ..<timestamp>/. */
function kubeletWrite(dir: string, token: string, gen: number): void {
  const ts = join(dir, `..2026_11_30_${gen}`);
  mkdirSync(ts);
  writeFileSync(join(ts, 'token'), token);
  writeFileSync(join(ts, 'ca.crt'), '-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n');
  writeFileSync(join(ts, 'namespace'), 'shop');
  symlinkSync(`..2026_11_30_${gen}`, join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  if (gen === 1) for (const f of ['token', 'ca.crt', 'namespace']) symlinkSync(`..data/${f}`, join(dir, f));
  else rmSync(join(dir, `..2026_11_30_${gen - 1}`), { recursive: true });
}

async function until(clock: FakeClock, cond: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !cond(); i++) {
    await clock.advance(50);
    await delay(5);
  }
  assert.ok(cond(), 'condition not reached');
}

test('reads token, CA, namespace and the JWT expiry', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-id-'));
  kubeletWrite(dir, jwt(1_800_000_000, 'one'), 1);
  const id = await openTokenSource({ dir, clock: new FakeClock(), logger: memoryLogger() });
  try {
    assert.equal(id.token(), jwt(1_800_000_000, 'one'));
    assert.equal(id.namespace(), 'shop');
    assert.match(id.caPem() ?? '', /BEGIN CERTIFICATE/);
    assert.equal(id.expiresAt(), 1_800_000_000_000);
  } finally {
    id.close();
    rmSync(dir, { recursive: true });
  }
});

test('a ..data symlink swap is picked up without a restart, and the token is never logged', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-id-'));
  const clock = new FakeClock();
  const log = memoryLogger();
  kubeletWrite(dir, jwt(1_800_000_000, 'one'), 1);
  const id = await openTokenSource({ dir, clock, logger: log });
  try {
    kubeletWrite(dir, jwt(1_800_003_600, 'two'), 2);
    await until(clock, () => id.token().endsWith('sig-two'));
    assert.equal(id.expiresAt(), 1_800_003_600_000);
    assert.ok(log.lines.some((l) => l.msg === 'service-account token rotated'));
    const text = JSON.stringify(log.lines);
    assert.ok(!text.includes('sig-one') && !text.includes('sig-two'), 'token leaked into logs');
  } finally {
    id.close();
    rmSync(dir, { recursive: true });
  }
});

test('re-reads at least every 60 s and keeps the last token when a read fails', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-id-'));
  const clock = new FakeClock();
  const log = memoryLogger();
  kubeletWrite(dir, 'opaque-token-1', 1);
  const id = await openTokenSource({ dir, clock, logger: log, refreshMs: 300_000 });
  try {
    assert.ok(
      clock.pending().every((ms) => ms <= 60_000),
      'periodic re-read capped at 60 s',
    );
    assert.equal(id.expiresAt(), undefined, 'not a JWT: no expiry');
    rmSync(join(dir, '..data'));
    assert.equal(await id.refresh(), false);
    assert.equal(await id.refresh(), false);
    assert.equal(id.token(), 'opaque-token-1');
    assert.equal(log.lines.filter((l) => l.level === 'warn').length, 1, 'one warning per failure streak');
  } finally {
    id.close();
    rmSync(dir, { recursive: true });
  }
});

test('a missing token directory is identity_unavailable', async () => {
  await assert.rejects(
    openTokenSource({ dir: '/nonexistent/outrigger', clock: new FakeClock(), logger: memoryLogger() }),
    (e: unknown) => isOutriggerError(e, 'identity_unavailable'),
  );
});

test('jwtExpiry ignores what is not a JWT', () => {
  assert.equal(jwtExpiry('a.b.c'), undefined);
  assert.equal(jwtExpiry('nodots'), undefined);
});

test('in-cluster config needs both KUBERNETES_SERVICE_HOST and _PORT, never a fallback', () => {
  assert.throws(
    () => inClusterServer({}),
    (e: unknown) =>
      isOutriggerError(e, 'config_invalid') &&
      /KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT/.test(e.message),
  );
  assert.throws(() => inClusterServer({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }), /KUBERNETES_SERVICE_PORT/);
  assert.throws(
    () => inClusterServer({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: 'x' }),
    /1-65535/,
  );
  assert.equal(
    inClusterServer({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }).href,
    'https://10.0.0.1/',
  );
  assert.equal(
    inClusterServer({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' }).host,
    '[fd00::1]:6443',
  );
});
