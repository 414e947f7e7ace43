import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { createFileResolver } from '../../../src/discovery/file-source.ts';
import type { Resolution } from '../../../src/discovery/types.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const yaml = (ip: string): string => `
apiVersion: v1
kind: Service
metadata: { name: web, namespace: demo }
spec: { clusterIP: 10.96.0.5, ports: [{ name: http, port: 80, protocol: TCP }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-1, namespace: demo, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
endpoints: [{ addresses: [${ip}] }]
ports: [{ name: http, port: 8080, protocol: TCP }]
`;

const first = (r: Resolution): string | undefined =>
  r.kind === 'found' ? r.service.endpoints.get('http')?.[0]?.address : undefined;

function setup(): { dir: string; path: string; clock: FakeClock; log: ReturnType<typeof memoryLogger> } {
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-file-'));
  return { dir, path: join(dir, 'cluster.yaml'), clock: new FakeClock(), log: memoryLogger() };
}

/** Advances fake time in steps, yielding to real I/O between them, until cond holds (bounded). */
async function until(clock: FakeClock, cond: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !cond(); i++) {
    await clock.advance(500);
    await delay(5);
  }
  assert.ok(cond(), 'condition not reached');
}

test('file source resolves Services, ClusterIPs and absent names', async () => {
  const { dir, path, clock, log } = setup();
  writeFileSync(path, yaml('10.1.0.1'));
  const r = createFileResolver({ path, clock, logger: log });
  try {
    const res = await r.resolve({ namespace: 'demo', name: 'web' });
    assert.equal(first(res), '10.1.0.1');
    assert.equal(res.kind === 'found' && res.source, 'file');
    assert.equal(res.kind === 'found' && res.freshness.state, 'fresh');
    assert.deepEqual(r.byClusterIP('10.96.0.5'), { namespace: 'demo', name: 'web' });
    assert.deepEqual(r.peek({ namespace: 'demo', name: 'nope' }), { kind: 'absent' });
    assert.equal(r.ready(), true);
    assert.equal(r.status().services[0]?.endpoints, 1);
  } finally {
    await r.close();
    rmSync(dir, { recursive: true });
  }
});

test('file source picks up a rename-over and keeps last-known-good on a broken file', async () => {
  const { dir, path, clock, log } = setup();
  writeFileSync(path, yaml('10.1.0.1'));
  const r = createFileResolver({ path, clock, logger: log, pollMs: 1_000 });
  const key = { namespace: 'demo', name: 'web' };
  try {
    await r.resolve(key);
    writeFileSync(join(dir, 'tmp'), yaml('10.1.0.2'));
    renameSync(join(dir, 'tmp'), path);
    await until(clock, () => first(r.peek(key)) === '10.1.0.2');

    writeFileSync(path, 'kind: Service\nmetadata: [unclosed');
    await until(clock, () => r.status().staleServices === 1);
    const stale = r.peek(key);
    assert.equal(first(stale), '10.1.0.2', 'a broken file never removes data');
    assert.equal(stale.kind === 'found' && stale.freshness.state, 'stale');
    const warnings = log.lines.filter((l) => l.level === 'warn');
    await clock.advance(5_000);
    assert.equal(log.lines.filter((l) => l.level === 'warn').length, warnings.length, 'no repeated warning');

    rmSync(path);
    await r.reload();
    assert.equal(first(r.peek(key)), '10.1.0.2', 'a missing file never removes data');

    writeFileSync(path, yaml('10.1.0.3'));
    await until(clock, () => first(r.peek(key)) === '10.1.0.3');
    assert.equal(r.status().staleServices, 0);
  } finally {
    await r.close();
    rmSync(dir, { recursive: true });
  }
});

test('file source with no readable file reports unknown, not absent', async () => {
  const { dir, path, clock, log } = setup();
  const r = createFileResolver({ path, clock, logger: log });
  try {
    const res = await r.resolve({ namespace: 'demo', name: 'web' });
    assert.equal(res.kind, 'unknown');
    assert.equal(r.ready(), false);
  } finally {
    await r.close();
    rmSync(dir, { recursive: true });
  }
});
