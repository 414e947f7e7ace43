// `outrigger webhook` as a process: it serves its probes over TLS with the certificate it was
// given, and on SIGTERM it stops after the shutdown delay with status 0.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { waitFor } from '../../harness/discovery.ts';
import { makeWebhookCerts, opensslAvailable } from '../../harness/injector.ts';
import { logLine } from '../../harness/log-line.ts';
import { inCI, repoRoot } from '../../harness/tools.ts';

const skip = !opensslAvailable();
if (skip && inCI) throw new Error('CI=true and openssl is not available for the webhook certificates');
const tmp = mkdtempSync(path.join(os.tmpdir(), 'outrigger-webhook-process-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function healthz(port: number, ca: string): Promise<number> {
  return new Promise((resolve) => {
    const req = https.get({ host: '127.0.0.1', port, path: '/healthz', ca, timeout: 1_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

test('outrigger webhook serves its probes over TLS and exits 0 after SIGTERM', { skip }, async (t) => {
  const certs = makeWebhookCerts(path.join(tmp, 'certs'));
  const child = spawn(
    process.execPath,
    [
      path.join(repoRoot, 'src/main.ts'),
      'webhook',
      ...['--listen-host', '127.0.0.1', '--https-port', '0', '--shutdown-delay', '0s'],
      ...['--tls-cert', path.join(certs.dir, 'tls.crt'), '--tls-key', path.join(certs.dir, 'tls.key')],
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  t.after(() => child.kill('SIGKILL'));
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const port = Number((await logLine(child.stderr, 'webhook listening')).port);
  await waitFor('the webhook /healthz', async () => (await healthz(port, certs.caPem)) === 200);
  child.kill('SIGTERM');
  assert.equal(await exited, 0, output);
  assert.match(output, /shutting down/);
});
