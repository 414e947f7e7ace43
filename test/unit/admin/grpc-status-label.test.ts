import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Metrics } from '../../../src/admin/metrics.ts';

const series = async (m: Metrics): Promise<string[]> =>
  (await m.render()).split('\n').filter((l) => l.startsWith('outrigger_grpc_calls_total{'));

test('grpc_status takes only the 17 defined codes: any other code an upstream sends counts as UNKNOWN (2)', async () => {
  const m = new Metrics();
  m.grpcCall('egress', 'shop/api', 0);
  m.grpcCall('egress', 'shop/api', 16);
  for (let code = 17; code < 1_017; code++) m.grpcCall('egress', 'shop/api', code);
  m.grpcCall('egress', 'shop/api', 2);
  const lines = await series(m);
  assert.deepEqual(
    lines.map((l) => /grpc_status="([^"]*)"/.exec(l)?.[1]).sort(),
    ['0', '16', '2'],
    lines.join('\n'),
  );
  assert.ok(
    lines.some((l) => l.includes('grpc_status="2"') && l.endsWith(' 1001')),
    lines.join('\n'),
  );
});
