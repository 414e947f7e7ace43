import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rewriteProbes } from '../../../src/injector/probes.ts';
import type { Container } from '../../../src/injector/types.ts';

const ADMIN = 7402;

test('a gRPC probe is rewritten to the admin port like HTTP and TCP ones, keeping its timings', () => {
  const containers = [
    {
      name: 'cart',
      image: 'example/cart:1',
      readinessProbe: { grpc: { port: 9090, service: 'shop.Cart' }, periodSeconds: 5, timeoutSeconds: 3 },
      livenessProbe: { grpc: { port: 9090 }, failureThreshold: 4 },
      startupProbe: { exec: { command: ['true'] } },
    },
  ] as unknown as Container[];
  const { ops, probes } = rewriteProbes(containers, ADMIN);
  assert.deepEqual(probes, {
    '/app-health/cart/readyz': { port: 9090, grpc: { service: 'shop.Cart' }, timeoutMs: 3000 },
    '/app-health/cart/livez': { port: 9090, grpc: { service: '' } },
  });
  assert.deepEqual(ops, [
    {
      op: 'add',
      path: '/spec/containers/0/livenessProbe',
      value: {
        failureThreshold: 4,
        httpGet: { path: '/app-health/cart/livez', port: ADMIN, scheme: 'HTTP' },
      },
    },
    {
      op: 'add',
      path: '/spec/containers/0/readinessProbe',
      value: {
        periodSeconds: 5,
        timeoutSeconds: 3,
        httpGet: { path: '/app-health/cart/readyz', port: ADMIN, scheme: 'HTTP' },
      },
    },
  ]);
});

test('HTTP and TCP probes carry their timeout; exec probes, unknown named ports and the admin port are left alone', () => {
  const containers = [
    {
      name: 'web',
      image: 'example/web:1',
      ports: [{ name: 'http', containerPort: 8080 }],
      readinessProbe: { httpGet: { path: '/ready', port: 'http' }, timeoutSeconds: 2 },
      livenessProbe: { tcpSocket: { port: 'nope' } },
      startupProbe: { httpGet: { path: '/healthz', port: ADMIN } },
    },
    { name: 'db', image: 'example/db:1', livenessProbe: { tcpSocket: { port: 5432 }, timeoutSeconds: 1 } },
  ] as unknown as Container[];
  const { ops, probes } = rewriteProbes(containers, ADMIN);
  assert.deepEqual(probes, {
    '/app-health/web/readyz': { port: 8080, path: '/ready', timeoutMs: 2000 },
    '/app-health/db/livez': { port: 5432, timeoutMs: 1000 },
  });
  assert.deepEqual(
    ops.map((o) => o.path),
    ['/spec/containers/0/readinessProbe', '/spec/containers/1/livenessProbe'],
  );
});
