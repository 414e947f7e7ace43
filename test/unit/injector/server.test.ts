import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { after, before, test } from 'node:test';
import { X509Certificate } from 'node:crypto';
import { loadConfig } from '../../../src/config/load.ts';
import { startWebhookServer, type WebhookServer } from '../../../src/injector/server.ts';
import { injectorSettings } from '../../../src/injector/settings.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';
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

/** Resolves with how the connection ended once the server closes it; fails if it is still open after limitMs. */
function closedByServer(socket: net.Socket, limitMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connection still open after ${limitMs} ms`));
    }, limitMs);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

test(
  'a connection that never completes a TLS handshake, or never sends a request, is closed',
  { skip },
  async () => {
    const quick = await startWebhookServer({
      host: '127.0.0.1',
      port: 0,
      certFile: path.join(secretDir, 'tls.crt'),
      keyFile: path.join(secretDir, 'tls.key'),
      settings: injectorSettings(loadConfig({ env: {} })),
      log: memoryLogger(),
      clock,
      idleTimeoutMs: 300,
    });
    try {
      // Without the bound both stay open for Node's 120 s handshake default, or for ever.
      await closedByServer(net.connect(quick.port, '127.0.0.1'), 5_000);
      const secure = tls.connect({
        host: '127.0.0.1',
        port: quick.port,
        ca: certs.caPem,
        servername: 'outrigger-webhook',
      });
      await new Promise<void>((resolve, reject) => {
        secure.once('secureConnect', resolve);
        secure.once('error', reject);
      });
      await closedByServer(secure, 5_000);
    } finally {
      await quick.close();
    }
  },
);

const reviewWith = (object: unknown, request: Record<string, unknown> = {}) =>
  JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'u-2',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      operation: 'CREATE',
      namespace: 'shop',
      object,
      ...request,
    },
  });
const app = { name: 'app', image: 'x' };
const malformed: [string, string, RegExp][] = [
  [
    'a null container',
    reviewWith({ spec: { containers: [null] } }),
    /spec\.containers\[0\] must be an object/,
  ],
  [
    'a string container',
    reviewWith({ spec: { containers: ['app'] } }),
    /spec\.containers\[0\] must be an object/,
  ],
  [
    'a numeric container name',
    reviewWith({ spec: { containers: [{ name: 7 }] } }),
    /containers\[0\]\.name must be a string/,
  ],
  [
    'a boolean annotation value',
    reviewWith({ metadata: { annotations: { 'outrigger.dev/inject': true } }, spec: { containers: [app] } }),
    /metadata\.annotations\["outrigger.dev\/inject"\] must be a string/,
  ],
  [
    'a numeric label value',
    reviewWith({ metadata: { labels: { app: 1 } }, spec: { containers: [app] } }),
    /metadata\.labels\["app"\] must be a string/,
  ],
  [
    'annotations as a list',
    reviewWith({ metadata: { annotations: ['a'] }, spec: { containers: [app] } }),
    /annotations must be an object/,
  ],
  [
    'metadata as a string',
    reviewWith({ metadata: 'p', spec: { containers: [app] } }),
    /metadata must be an object/,
  ],
  ['a null spec', reviewWith({ spec: null }), /spec must be an object/],
  ['containers as an object', reviewWith({ spec: { containers: {} } }), /spec\.containers must be a list/],
  [
    'a null init container',
    reviewWith({ spec: { containers: [app], initContainers: [null] } }),
    /initContainers\[0\] must be an object/,
  ],
  [
    'env as an object',
    reviewWith({ spec: { containers: [{ ...app, env: { A: '1' } }] } }),
    /containers\[0\]\.env must be a list/,
  ],
  [
    'a null env entry',
    reviewWith({ spec: { containers: [{ ...app, env: [null] }] } }),
    /env\[0\] must be an object/,
  ],
  [
    'a numeric env name',
    reviewWith({ spec: { containers: [{ ...app, env: [{ name: 1 }] }] } }),
    /env\[0\]\.name must be a string/,
  ],
  [
    'a string containerPort',
    reviewWith({ spec: { containers: [{ ...app, ports: [{ containerPort: '80' }] }] } }),
    /ports\[0\]\.containerPort must be an integer/,
  ],
  [
    'a null port',
    reviewWith({ spec: { containers: [{ ...app, ports: [null] }] } }),
    /ports\[0\] must be an object/,
  ],
  [
    'volumes as a string',
    reviewWith({ spec: { containers: [app], volumes: 'v' } }),
    /spec\.volumes must be a list/,
  ],
  [
    'hostNetwork as a string',
    reviewWith({ spec: { containers: [app], hostNetwork: 'yes' } }),
    /hostNetwork must be a boolean/,
  ],
  [
    'request.kind as a string',
    reviewWith({ spec: { containers: [app] } }, { kind: 'Pod' }),
    /request\.kind must be an object/,
  ],
  [
    'a numeric operation',
    reviewWith({ spec: { containers: [app] } }, { operation: 1 }),
    /request\.operation must be a string/,
  ],
  [
    'a numeric namespace',
    reviewWith({ spec: { containers: [app] } }, { namespace: 1 }),
    /request\.namespace must be a string/,
  ],
  [
    'a string dryRun',
    reviewWith({ spec: { containers: [app] } }, { dryRun: 'yes' }),
    /request\.dryRun must be a boolean/,
  ],
  [
    'a null request',
    JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: null }),
    /request/,
  ],
  ['a JSON null body', 'null', /AdmissionReview/],
  ['a JSON list body', '[]', /AdmissionReview/],
];

test('a malformed AdmissionReview gets 400 naming the field, never 500', { skip }, async () => {
  for (const [what, body, message] of malformed) {
    const r = await call('POST', '/mutate', body);
    assert.equal(r.status, 400, `${what}: ${r.status} ${r.body}`);
    assert.match(r.body, message, what);
  }
  assert.equal(log.lines.filter((l) => l.msg === 'webhook request failed').length, 0, 'no internal error');
  assert.equal((await call('POST', '/mutate', podReview())).status, 200, 'still serving');
});
