// The shipped webhook Deployment and the CLI agree: its args, env, Secret mount and probes start a
// working `outrigger webhook` (only the listen address and the mount path are remapped here).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { webhookOptions } from '../../../src/config/webhook-options.ts';
import { makeWebhookCerts, opensslAvailable, writeSecretDir } from '../../harness/injector.ts';
import { logLine } from '../../harness/log-line.ts';
import { inCI, repoRoot } from '../../harness/tools.ts';

const skip = !opensslAvailable();
if (skip && inCI) throw new Error('CI=true and openssl is not available for the webhook certificates');

interface WebhookContainer {
  args: string[];
  env: { name: string; value?: string }[];
  volumeMounts: { name: string; mountPath: string }[];
  readinessProbe: { httpGet: { path: string; port: string; scheme: string } };
  ports: { name: string; containerPort: number }[];
}

test(
  'the webhook Deployment starts `outrigger webhook` and passes its readiness probe',
  { skip },
  async (t) => {
    const file = path.join(repoRoot, 'manifests/webhook/deployment.yaml');
    const deployment = parse(readFileSync(file, 'utf8')) as {
      spec: { replicas: number; template: { spec: { containers: WebhookContainer[] } } };
    };
    assert.ok(deployment.spec.replicas >= 2, 'at least two replicas: the webhook fails closed');
    const c = deployment.spec.template.spec.containers[0];
    assert.ok(c);
    const mount = c.volumeMounts.find((m) => m.name === 'tls');
    assert.ok(mount);
    const main = path.join(repoRoot, 'src/main.ts');
    assert.equal(
      webhookOptions.tlsCert.default,
      `${mount.mountPath}/tls.crt`,
      'CLI default = the mounted Secret',
    );

    const tmp = mkdtempSync(path.join(os.tmpdir(), 'outrigger-webhook-deploy-'));
    t.after(() => rmSync(tmp, { recursive: true, force: true }));
    const certs = makeWebhookCerts(path.join(tmp, 'certs'));
    const secret = path.join(tmp, 'secret');
    writeSecretDir(secret, { 'tls.crt': certs.certPem, 'tls.key': certs.keyPem });
    const local: Record<string, string> = { '0.0.0.0': '127.0.0.1', '8443': '0' };
    const args = c.args.map((a) => local[a] ?? a);
    assert.deepEqual(
      c.args.slice(1),
      ['--listen-host', '0.0.0.0', '--https-port', '8443'],
      'the manifest listens on 0.0.0.0:8443',
    );
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      OUTRIGGER_POD_NAMESPACE: 'outrigger-system',
      OUTRIGGER_TLS_CERT: path.join(secret, 'tls.crt'),
      OUTRIGGER_TLS_KEY: path.join(secret, 'tls.key'),
      OUTRIGGER_SHUTDOWN_DELAY: '0s',
    };
    for (const e of c.env) if (e.value !== undefined) env[e.name] = e.value;
    const child = spawn(process.execPath, [main, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    t.after(() => child.kill('SIGKILL'));
    const port = Number((await logLine(child.stderr, 'webhook listening')).port);

    const probe = c.readinessProbe.httpGet;
    assert.equal(probe.scheme, 'HTTPS');
    assert.equal(c.ports.find((p) => p.name === probe.port)?.containerPort, 8443);
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = await new Promise<number>((resolve) => {
        const req = https.get(
          {
            host: '127.0.0.1',
            port,
            path: probe.path,
            ca: certs.caPem,
            servername: 'outrigger-webhook.outrigger-system.svc',
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', () => resolve(0));
      });
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 200, stderr);
    child.kill('SIGTERM');
    assert.equal(await exited, 0, 'SIGTERM shuts down cleanly');
  },
);
