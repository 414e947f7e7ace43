import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { makeWebhookCerts, opensslAvailable } from '../../harness/injector.ts';
import { inCI } from '../../harness/tools.ts';

const skip = !opensslAvailable();
if (skip && inCI) throw new Error('CI=true and openssl is not available for gen-webhook-certs');

const bundle = (b64: string): X509Certificate[] =>
  (
    Buffer.from(b64, 'base64')
      .toString()
      .match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? []
  ).map((pem) => new X509Certificate(pem));

test(
  'gen-webhook-certs: a serving certificate for the Service names, signed by the bundled CA',
  { skip },
  (t) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-certs-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const c = makeWebhookCerts(dir, ['--namespace', 'mesh', '--ip', '127.0.0.1']);
    const leaf = new X509Certificate(c.certPem);
    const ca = new X509Certificate(c.caPem);
    assert.ok(leaf.verify(ca.publicKey), 'signed by the CA');
    assert.ok(leaf.checkPrivateKey(createPrivateKey(c.keyPem)), 'key matches');
    assert.equal(leaf.checkHost('outrigger-webhook.mesh.svc'), 'outrigger-webhook.mesh.svc');
    assert.equal(leaf.checkIP('127.0.0.1'), '127.0.0.1');
    assert.equal(ca.ca, true);
    assert.deepEqual(
      bundle(c.caBundle).map((x) => x.fingerprint256),
      [ca.fingerprint256],
    );
    const overlay = readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8');
    assert.equal(overlay.split(c.caBundle).length - 1, 3, 'caBundle patched into the three webhook entries');
  },
);

test(
  'gen-webhook-certs: re-running keeps the CA; --new-ca keeps the old one in the bundle',
  { skip },
  (t) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-certs-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const first = makeWebhookCerts(dir, []);
    const second = makeWebhookCerts(dir, []);
    assert.equal(second.caPem, first.caPem);
    assert.equal(second.caBundle, first.caBundle);
    assert.notEqual(second.certPem, first.certPem);
    const third = makeWebhookCerts(dir, ['--new-ca']);
    const fps = bundle(third.caBundle).map((x) => x.fingerprint256);
    assert.deepEqual(fps, [
      new X509Certificate(third.caPem).fingerprint256,
      new X509Certificate(first.caPem).fingerprint256,
    ]);
    assert.ok(new X509Certificate(third.certPem).verify(new X509Certificate(third.caPem).publicKey));
  },
);
