import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Issuer } from '../../../src/mesh/issuer.ts';
import { startIssuerServer } from '../../../src/mesh/issuer-server.ts';
import { systemClock } from '../../../src/shared/clock.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { FakeReviewer, fakeSaToken, fileProxyArgs, identityEnv, testCa } from '../../harness/mesh.ts';
import { closedPort, eventually, send } from '../proxy/harness.ts';

const main = new URL('../../../src/main.ts', import.meta.url).pathname;
const log = createLogger({ write: () => {} });

test('outrigger proxy --mtls permissive: identity on /debug, /metrics and status; kept across a restart with the issuer down', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-mesh-proc-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const ca = await testCa();
  const reviewer = new FakeReviewer();
  const issuer = await startIssuerServer({
    host: '127.0.0.1',
    port: 0,
    issuer: new Issuer({
      ca,
      reviewer,
      trustDomain: 'cluster.local',
      audience: 'outrigger-identity',
      ttlMs: 3600_000,
      clock: systemClock,
      log,
      requireBoundPod: true,
    }),
    ca,
    servingNames: ['127.0.0.1'],
    clock: systemClock,
    log,
  });
  t.after(() => issuer.close());
  writeFileSync(path.join(dir, 'cluster.yaml'), '');
  writeFileSync(path.join(dir, 'ca.crt'), ca.trustBundle);
  writeFileSync(path.join(dir, 'token'), reviewer.podToken(fakeSaToken('shop', 'web'), 'shop', 'web'));
  const [egress, ingress, admin] = [await closedPort(), await closedPort(), await closedPort()];

  const start = () => {
    const child = spawn(
      process.execPath,
      [main, ...fileProxyArgs(path.join(dir, 'cluster.yaml')), '--mtls', 'permissive'],
      {
        env: {
          ...process.env,
          OUTRIGGER_EGRESS_PORT: String(egress),
          OUTRIGGER_INGRESS_PORT: String(ingress),
          OUTRIGGER_ADMIN_PORT: String(admin),
          OUTRIGGER_POD_INFO_DIR: dir,
          OUTRIGGER_TRACE_SAMPLING: '0',
          ...identityEnv(`https://127.0.0.1:${issuer.port}/`, dir),
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let logs = '';
    child.stderr.on('data', (d: Buffer) => (logs += d.toString()));
    t.after(() => child.kill('SIGKILL'));
    const exited = new Promise((r) => child.once('exit', r));
    return { child, exited, logs: () => logs };
  };
  const identity = async () => {
    const r = await send(admin, { path: '/debug/identity' }).catch(() => ({ status: 0, body: '' }));
    return r.status === 200
      ? (JSON.parse(r.body) as { ready: boolean; source: string; spiffeId: string })
      : undefined;
  };

  const first = start();
  await eventually('an identity from the issuer', async () => (await identity())?.ready === true);
  assert.equal((await identity())?.source, 'issuer');
  assert.equal((await identity())?.spiffeId, 'spiffe://cluster.local/ns/shop/sa/web');
  const metrics = (await send(admin, { path: '/metrics' })).body;
  assert.match(metrics, /^outrigger_identity_ready 1$/m);
  assert.match(metrics, /^outrigger_identity_expiry_timestamp_seconds \d{10}/m);
  assert.match(metrics, /^outrigger_identity_renewal_failures_total 0$/m);
  const status = spawnSync(process.execPath, [main, 'status', '--admin', `http://127.0.0.1:${admin}`], {
    encoding: 'utf8',
  });
  assert.equal(status.status, 0, status.stderr);
  assert.match(
    status.stdout,
    /identity: spiffe:\/\/cluster\.local\/ns\/shop\/sa\/web {3}valid: yes \(issuer\)/,
  );

  // The sidecar dies and comes back while the issuer is down: it serves the stored identity.
  first.child.kill('SIGKILL');
  await first.exited;
  await issuer.close();
  const second = start();
  await eventually('the restarted sidecar', async () => (await identity()) !== undefined);
  const after = await identity();
  assert.equal(after?.ready, true, second.logs());
  assert.equal(after?.source, 'stored');
});
