import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readlinkSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { rotateToken, writeTokenDir } from '../../harness/token-dir.ts';

test('the token directory has the kubelet ..data layout and rotates atomically', (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tokdir-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeTokenDir(dir, { token: 'one', caPem: 'CA', namespace: 'ns1' });
  assert.equal(readlinkSync(path.join(dir, 'token')), '..data/token');
  assert.equal(readFileSync(path.join(dir, 'token'), 'utf8'), 'one');
  const firstTarget = readlinkSync(path.join(dir, '..data'));
  rotateToken(dir, { token: 'two', caPem: 'CA', namespace: 'ns1' });
  assert.equal(readFileSync(path.join(dir, 'token'), 'utf8'), 'two');
  assert.notEqual(readlinkSync(path.join(dir, '..data')), firstTarget);
  const versions = readdirSync(dir).filter((n) => n.startsWith('..') && n !== '..data');
  assert.equal(versions.length, 1, 'the old version directory is removed');
});
