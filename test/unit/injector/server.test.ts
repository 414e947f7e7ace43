import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { after, before, test } from 'node:test';
import { X509Certificate } from 'node:crypto';
import { loadConfig } from '../../../src/config/load.ts';
import { startWebhookServer, type WebhookServer } from '../../../src/injector/server.ts';
import { injectorSettings } from '../../../src/injector/settings.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../../src/shared/log.ts';
import {
  makeWebhookCerts,
  opensslAvailable,
  rotateSecretDir,
  writeSecretDir,
  type WebhookCerts,
} from '../../harness/injector.ts';
import { inCI } from '../../harness/tools.ts';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'outrigger-webhook-'));
const clock = new FakeClock();
const log = memoryLogger();
let certs: WebhookCerts;
let server: WebhookServer;
const secretDir = path.join(tmp, 'secret');

const skip = !opensslAvailable();
if (skip && inCI) throw new Error('CI=true and openssl is not available for the webhook certificates');

before(async () => {
  if (skip) return;
  certs = makeWebhookCerts(path.join(tmp, 'certs'));
  writeSecretDir(secretDir, { 'tls.crt': certs.certPem, 'tls.key': certs.keyPem });
  server = await startWebhookServer({
    host: '127.0.0.1',
    port: 0,
    certFile: path.join(secretDir, 'tls.crt'),
    keyFile: path.join(secretDir, 'tls.key'),
    settings: injectorSettings(loadConfig({ env: {} }), 'outrigger-system'),
    log,
    clock,
    certPollMs: 10_000,
  });
});

after(async () => {
  await server?.close();
  rmSync(tmp, { recursive: true, force: true });
});

interface Reply {
  status: number;
  body: string;
}

function call(
  method: string,
  urlPath: string,
  body?: string | Buffer,
  type = 'application/json',
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: server.port,
        method,
        path: urlPath,
        ca: certs.caPem,
        servername: 'outrigger-webhook.outrigger-system.svc',
        agent: false,
        headers: body === undefined ? {} : { 'content-type': type },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function servedFingerprint(): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tls.connect(
      { host: '127.0.0.1', port: server.port, ca: certs.caPem, servername: 'outrigger-webhook' },
      () => {
        resolve(s.getPeerX509Certificate()?.fingerprint256 ?? '');
        s.end();
      },
    );
    s.on('error', reject);
  });
}

const podReview = (annotations: Record<string, string> = {}) =>
  JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'u-1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      operation: 'CREATE',
      namespace: 'shop',
      object: { metadata: { name: 'p', annotations }, spec: { containers: [{ name: 'app', image: 'x' }] } },
    },
  });

test('answers an AdmissionReview over TLS with a JSON patch', { skip }, async () => {
  const r = await call('POST', '/mutate', podReview());
  assert.equal(r.status, 200);
  const review = JSON.parse(r.body) as {
    response: { uid: string; allowed: boolean; patchType: string; patch: string };
  };
  assert.equal(review.response.uid, 'u-1');
  assert.equal(review.response.allowed, true);
  assert.equal(review.response.patchType, 'JSONPatch');
  const patch = JSON.parse(Buffer.from(review.response.patch, 'base64').toString()) as { path: string }[];
  assert.ok(patch.some((op) => op.path === '/spec/initContainers'));
});

test('the path carries the Pod Security level', { skip }, async () => {
  const r = await call('POST', '/mutate/restricted', podReview());
  const review = JSON.parse(r.body) as { response: { warnings: string[] } };
  assert.match(review.response.warnings[0] ?? '', /Pod Security "restricted".*explicit/);
  assert.equal((await call('POST', '/mutate/superuser', podReview())).status, 404);
});

test(
  'an invalid annotation is denied with the annotation, the value and what is allowed',
  { skip },
  async () => {
    const r = await call('POST', '/mutate', podReview({ 'outrigger.dev/log-level': 'loud' }));
    const review = JSON.parse(r.body) as {
      response: { allowed: boolean; status: { message: string; code: number } };
    };
    assert.equal(review.response.allowed, false);
    assert.equal(review.response.status.code, 400);
    assert.equal(
      review.response.status.message,
      'invalid annotation outrigger.dev/log-level="loud": expected one of debug, info, warn, error',
    );
  },
);

test('refuses what is not an AdmissionReview: wrong type, method, path, body, size', { skip }, async () => {
  assert.equal((await call('POST', '/mutate', podReview(), 'text/plain')).status, 415);
  assert.equal((await call('GET', '/mutate')).status, 405);
  assert.equal((await call('POST', '/elsewhere', podReview())).status, 404);
  assert.equal((await call('POST', '/mutate', '{not json')).status, 400);
  const notReview = await call('POST', '/mutate', JSON.stringify({ kind: 'Pod' }));
  assert.equal(notReview.status, 400);
  assert.match(notReview.body, /AdmissionReview/);
  const big = Buffer.alloc(6 * 1024 * 1024 + 1, 0x20);
  assert.equal((await call('POST', '/mutate', big)).status, 413);
  assert.equal((await call('GET', '/healthz')).status, 200);
  assert.equal((await call('GET', '/readyz')).status, 200);
});

test('a rotated certificate is served without a restart; a broken pair is ignored', { skip }, async () => {
  const first = await servedFingerprint();
  assert.equal(first, new X509Certificate(certs.certPem).fingerprint256);

  // A torn update (new certificate, old key) must not replace a working pair.
  const next = makeWebhookCerts(path.join(tmp, 'certs'));
  rotateSecretDir(secretDir, { 'tls.crt': next.certPem, 'tls.key': certs.keyPem });
  assert.equal(await server.reloadCertificate(), false);
  assert.equal(await servedFingerprint(), first);
  assert.ok(log.lines.some((l) => l.msg === 'new serving certificate not loaded; keeping the previous one'));

  // The finished rotation is picked up on its own (directory watch or poll), with no explicit reload.
  rotateSecretDir(secretDir, { 'tls.crt': next.certPem, 'tls.key': next.keyPem });
  await clock.advance(10_000);
  await waitFor(async () => (await servedFingerprint()) === new X509Certificate(next.certPem).fingerprint256);
});

/** Polls a condition a bounded number of times; the poll above has already fired on the fake clock. */
async function waitFor(cond: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 50; i++) {
    if (await cond()) return;
    await clock.advance(10_000);
  }
  assert.fail('condition not reached');
}
