import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TrustBundle } from '../../../src/mesh/trust-bundle.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { testCa, until } from '../../harness/mesh.ts';

const log = createLogger({ write: () => {} });

test('the trust bundle reloads live, and a broken file keeps the previous roots', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-bundle-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'ca.crt');
  const [a, b] = [await testCa(Date.now(), 'root a'), await testCa(Date.now(), 'root b')];
  writeFileSync(file, a.trustBundle);
  const clock = new FakeClock();
  const bundle = new TrustBundle({ file, clock, log, pollMs: 10_000 });
  await bundle.start();
  t.after(() => bundle.close());
  const seen: string[] = [];
  bundle.onChange((pem) => seen.push(pem));
  assert.equal(bundle.pem().trim(), a.trustBundle.trim());

  // Rotation overlap: both roots, then b alone. The poll picks them up even without a watch event.
  writeFileSync(file, `${a.trustBundle}\n${b.trustBundle}`);
  await clock.advance(10_000);
  await until('the overlap bundle', () => seen.length >= 1);
  assert.match(bundle.pem(), /(BEGIN CERTIFICATE[\s\S]*){2}/);

  const before = bundle.pem();
  for (const broken of ['', 'garbage', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n']) {
    writeFileSync(file, broken);
    assert.equal(await bundle.reload(), false, JSON.stringify(broken));
    assert.equal(bundle.pem(), before);
  }
  // The directory watch may pick this up before the explicit reload does: either one installs it.
  writeFileSync(file, b.trustBundle);
  await bundle.reload();
  assert.equal(bundle.pem().trim(), b.trustBundle.trim());
  assert.ok(bundle.reloads >= 2);
});

test('a missing trust bundle at start-up is a configuration error naming the file', async () => {
  const bundle = new TrustBundle({ file: '/nonexistent/ca.crt', clock: new FakeClock(), log });
  await assert.rejects(bundle.start(), /trust bundle \/nonexistent\/ca\.crt/);
});
