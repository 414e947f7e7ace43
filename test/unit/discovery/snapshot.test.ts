import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { test } from 'node:test';
import protobuf from 'protobufjs';
import { parseObjects } from '../../../src/discovery/manifest.ts';
import { mergeService, serviceInfoJson } from '../../../src/discovery/merge.ts';
import {
  decodeSnapshot,
  encodeSnapshot,
  readSnapshot,
  SnapshotWriter,
} from '../../../src/discovery/snapshot.ts';
import { isOutriggerError } from '../../../src/shared/errors.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const golden = join(import.meta.dirname, '../../golden/discovery');

function allServices() {
  return readdirSync(golden)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => {
      const { services, slices } = parseObjects(readFileSync(join(golden, f), 'utf8'));
      return services.map((s) => mergeService(s, slices));
    });
}

test('every golden ServiceInfo survives a snapshot round trip unchanged', () => {
  const services = allServices().map((info, i) =>
    i % 2 ? { info, syncedAt: 1_700_000_000_000 + i } : { info },
  );
  const index = [{ key: { namespace: 'a', name: 'b' }, clusterIPs: ['10.96.0.1', 'fd00::1'] }];
  const back = decodeSnapshot(encodeSnapshot({ writtenAt: 1_700_000_000_123, services, index }));
  assert.equal(back.writtenAt, 1_700_000_000_123);
  assert.deepEqual(back.index, index);
  assert.deepEqual(
    back.services.map((s) => ({ ...s, info: serviceInfoJson(s.info) })),
    services.map((s) => ({ ...s, info: serviceInfoJson(s.info) })),
  );
});

test('a Service replaced or re-synced between writes is written anew; the others are reused as they were', () => {
  const json = (d: ReturnType<typeof decodeSnapshot>) =>
    d.services.map((s) => ({ ...s, info: serviceInfoJson(s.info) }));
  const [a, b, c] = allServices();
  assert.ok(a && b && c);
  const index = [{ key: { namespace: 'a', name: 'b' }, clusterIPs: ['10.96.0.1'] }];
  const first = [{ info: a }, { info: b, syncedAt: 1 }, { info: c, syncedAt: 2 }];
  assert.deepEqual(
    json(decodeSnapshot(encodeSnapshot({ writtenAt: 1, services: first, index }))),
    json({ writtenAt: 1, services: first, index }),
  );
  // b's endpoints changed (discovery hands out a new object); c was re-synced (same object).
  const b2 = { ...b, clusterIPs: [...b.clusterIPs, '10.96.9.9'] };
  const second = [{ info: a }, { info: b2, syncedAt: 3 }, { info: c, syncedAt: 4 }];
  const back = decodeSnapshot(encodeSnapshot({ writtenAt: 2, services: second, index }));
  assert.deepEqual(json(back), json({ writtenAt: 2, services: second, index }));
  assert.deepEqual(back.services[1]?.info.clusterIPs.at(-1), '10.96.9.9');
  assert.equal(back.services[2]?.syncedAt, 4);
});

test("a sidecar's mesh routes ride along as JSON text; a file without them reads as none", () => {
  const routes = [
    '{"kind":"HTTPRoute","metadata":{"namespace":"shop","name":"web"}}',
    '{"kind":"ReferenceGrant"}',
  ];
  assert.deepEqual(
    decodeSnapshot(encodeSnapshot({ writtenAt: 1, services: [], index: [], meshRoutes: routes })).meshRoutes,
    routes,
  );
  assert.deepEqual(decodeSnapshot(encodeSnapshot({ writtenAt: 1, services: [], index: [] })).meshRoutes, []);
});

test('truncated, bit-flipped, foreign and wrong-version files are rejected as snapshot_invalid', () => {
  const good = encodeSnapshot({ writtenAt: 1, services: allServices().map((info) => ({ info })), index: [] });
  const flipped = Buffer.from(good);
  flipped[flipped.length - 3] = (flipped[flipped.length - 3] ?? 0) ^ 0xff;
  const T = protobuf
    .loadSync(join(import.meta.dirname, '../../../proto/outrigger/v1/snapshot.proto'))
    .lookupType('outrigger.v1.Snapshot');
  const v2payload = Buffer.from(T.encode(T.fromObject({ formatVersion: 2, writtenAtMs: 1 })).finish());
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(v2payload));
  const v2 = Buffer.concat([Buffer.from('ORSNAP1\n'), crc, v2payload]);
  for (const [name, buf] of [
    ['truncated', good.subarray(0, good.length - 10)],
    ['flipped', flipped],
    ['empty', Buffer.alloc(0)],
    ['foreign', Buffer.from('{"services":[]}')],
    ['v2', v2],
  ] as const) {
    assert.throws(
      () => decodeSnapshot(buf),
      (e: unknown) => isOutriggerError(e, 'snapshot_invalid'),
      name,
    );
  }
});

test('the writer debounces many changes into one atomic write and leaves no temp file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'outrigger-snapw-'));
  const path = join(dir, 'snap.pb');
  const clock = new FakeClock();
  const log = memoryLogger();
  let collected = 0;
  const w = new SnapshotWriter({
    path,
    clock,
    logger: log,
    debounceMs: 2_000,
    collect: () => {
      collected++;
      return { writtenAt: clock.now(), services: allServices().map((info) => ({ info })), index: [] };
    },
  });
  try {
    for (let i = 0; i < 50; i++) w.schedule();
    await clock.advance(1_999);
    assert.equal(collected, 0);
    await clock.advance(1);
    for (let i = 0; i < 100 && w.writes === 0; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(collected, 1);
    assert.equal(w.writes, 1);
    assert.deepEqual(readdirSync(dir), ['snap.pb']);
    const read = await readSnapshot(path, log);
    assert.equal(read?.services.length, allServices().length);
    assert.equal(await readSnapshot(join(dir, 'missing.pb'), log), undefined);
    assert.equal(
      log.lines.filter((l) => l.level === 'warn').length,
      0,
      'a missing snapshot is not a warning',
    );
  } finally {
    await w.close(false);
    rmSync(dir, { recursive: true });
  }
});
