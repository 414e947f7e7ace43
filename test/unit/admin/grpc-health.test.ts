import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decodeHealthStatus,
  encodeHealthCheckRequest,
  grpcHealthCheck,
} from '../../../src/admin/grpc-health.ts';
import { startHealthServer } from '../../harness/grpc-health-server.ts';
import { closedPort } from '../proxy/harness.ts';

test('the gRPC health check passes on SERVING only, and says why it failed otherwise', async (t) => {
  const app = await startHealthServer(
    new Map([
      ['', 'SERVING'],
      ['shop.Cart', 'NOT_SERVING'],
      ['shop.Slow', 'hang'],
    ]),
  );
  t.after(() => app.close());
  assert.deepEqual(await grpcHealthCheck('127.0.0.1', app.port, '', 2_000), { ok: true, reason: 'SERVING' });
  assert.deepEqual(await grpcHealthCheck('127.0.0.1', app.port, 'shop.Cart', 2_000), {
    ok: false,
    reason: 'status NOT_SERVING',
  });
  assert.deepEqual(await grpcHealthCheck('127.0.0.1', app.port, 'shop.Nope', 2_000), {
    ok: false,
    reason: 'grpc-status 5 (unknown service)',
  });
  // The probe's own timeout bounds a server that never answers.
  assert.deepEqual(await grpcHealthCheck('127.0.0.1', app.port, 'shop.Slow', 300), {
    ok: false,
    reason: 'no answer within 300 ms',
  });
  assert.deepEqual(app.asked, ['', 'shop.Cart', 'shop.Nope', 'shop.Slow'], 'the service names as sent');
});

test('the gRPC health check fails on an app that is down', async () => {
  const r = await grpcHealthCheck('127.0.0.1', await closedPort(), '', 2_000);
  assert.deepEqual(r, { ok: false, reason: 'connect failed: ECONNREFUSED' });
});

test('HealthCheckRequest and HealthCheckResponse by hand: the wire format, unknown fields skipped', () => {
  assert.deepEqual([...encodeHealthCheckRequest('')], [0, 0, 0, 0, 0]);
  assert.deepEqual([...encodeHealthCheckRequest('ab')], [0, 0, 0, 0, 4, 0x0a, 2, 0x61, 0x62]);
  const frame = (...bytes: number[]): Buffer => Buffer.from([0, 0, 0, 0, bytes.length, ...bytes]);
  assert.equal(decodeHealthStatus(frame(0x08, 1)), 1);
  assert.equal(decodeHealthStatus(frame()), 0, 'absent status is UNKNOWN');
  assert.equal(decodeHealthStatus(frame(0x12, 1, 0x78, 0x08, 2)), 2, 'an unknown string field skipped');
  assert.equal(decodeHealthStatus(frame(0x08)), undefined, 'truncated');
  assert.equal(decodeHealthStatus(Buffer.from([1, 0, 0, 0, 2, 0x08, 1])), undefined, 'compressed');
  assert.equal(decodeHealthStatus(Buffer.from([0, 0, 0, 0, 3, 0x08, 1])), undefined, 'length mismatch');
});
