import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { identityOptions } from '../../../src/config/identity-options.ts';
import { parseValue } from '../../../src/config/parse.ts';
import { loadCa } from '../../../src/mesh/ca.ts';
import { generateP256, privateKeyPem, signLeaf } from '../../../src/mesh/x509.ts';
import { generateMeshCa, testCa } from '../../harness/mesh.ts';

function tmp(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-ca-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('gen-mesh-ca output loads: an intermediate signs, its root is the bundle, the chain has no root', async (t) => {
  const files = generateMeshCa(join(tmp(t), 'ca'));
  const ca = await loadCa(
    { certFile: files.certFile, keyFile: files.keyFile, trustBundleFile: files.bundleFile },
    Date.now(),
  );
  assert.equal(ca.chain.length, 1);
  assert.match(ca.trustBundle, /BEGIN CERTIFICATE/);
  await assert.rejects(
    loadCa({ certFile: files.certFile, keyFile: files.keyFile }, Date.now()),
    /is an intermediate: pass --trust-bundle/,
  );
});

test('a CA file that cannot sign is refused with the flag and the reason', async (t) => {
  const dir = tmp(t);
  const ca = await testCa();
  const other = await generateP256();
  const write = (name: string, text: string): string => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  };
  const certFile = write('ca.crt', ca.signer.certPem);
  const wrongKey = write('wrong.key', privateKeyPem(other.privateKey));
  await assert.rejects(
    loadCa({ certFile, keyFile: wrongKey }, Date.now()),
    /--ca-key .* does not match --ca-cert/,
  );
  const leaf = await signLeaf(ca.signer, {
    publicKey: other.publicKey,
    dns: ['x'],
    notBefore: new Date(),
    notAfter: new Date(Date.now() + 3600_000),
  });
  await assert.rejects(
    loadCa({ certFile: write('leaf.crt', leaf), keyFile: wrongKey }, Date.now()),
    /--ca-cert .* is not a CA/,
  );
  await assert.rejects(
    loadCa({ certFile: write('empty', ''), keyFile: wrongKey }, Date.now()),
    /no PEM certificate/,
  );
  await assert.rejects(
    loadCa({ certFile: join(dir, 'missing'), keyFile: wrongKey }, Date.now()),
    /--ca-cert .*missing/,
  );
  const key = write('ca.key', privateKeyPem(ca.signer.key));
  await assert.rejects(loadCa({ certFile, keyFile: key }, Date.now() + 2 * 365 * 86_400_000), /expired/);
});

const parseTtl = (flag: string, raw: string): number =>
  parseValue(identityOptions.certTtl.parser, flag, raw, 'flag');

test('--cert-ttl takes 60s to 90d and names the flag otherwise', () => {
  assert.equal(parseTtl('--cert-ttl', '24h'), 86_400_000);
  assert.equal(parseTtl('--cert-ttl', '60s'), 60_000);
  assert.equal(parseTtl('--cert-ttl', '90d'), 90 * 86_400_000);
  for (const bad of ['59s', '91d', '1h30m', '24', 'forever', '-1h'])
    assert.throws(() => parseTtl('--cert-ttl', bad), /--cert-ttl=.*from 1m to 90d/, bad);
});
