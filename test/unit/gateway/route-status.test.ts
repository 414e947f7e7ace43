// The Gateway API status writer on its own: what it writes, that a change arriving during a write
// pass is written by the next pass (not left to the resync), and that stale data writes nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RouteStatusWriter } from '../../../src/gateway/route-status.ts';
import { slimGatewayClass } from '../../../src/routes/objects.ts';
import { GatewayRouteTable } from '../../../src/routes/table.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

const CONTROLLER = 'outrigger.dev/gateway';
const tableAt = (generation: number): GatewayRouteTable =>
  new GatewayRouteTable({
    controller: CONTROLLER,
    classes: [
      slimGatewayClass({ metadata: { name: 'outrigger', generation }, spec: { controllerName: CONTROLLER } }),
    ],
    gateways: [],
    routes: [],
    grants: [],
  });

function writer(o: { table: () => GatewayRouteTable; stale?: () => boolean; gate?: Promise<void> }) {
  const patches: { path: string; patch: { status: { conditions: { observedGeneration?: number }[] } } }[] =
    [];
  const w = new RouteStatusWriter({
    api: {
      mergePatch: async (path, patch) => {
        patches.push({ path, patch: patch as (typeof patches)[number]['patch'] });
        await o.gate;
      },
    },
    controller: CONTROLLER,
    table: o.table,
    statusOf: (kind, m) => {
      const t = o.table();
      const key = `${m.namespace}/${m.name}`;
      const of = {
        GatewayClass: t.classes().get(m.name),
        Gateway: t.gateways().get(key),
        HTTPRoute: t.routes().get(`HTTPRoute ${key}`),
        GRPCRoute: t.routes().get(`GRPCRoute ${key}`),
      };
      return of[kind]?.status;
    },
    stale: o.stale ?? (() => false),
    secretUsable: () => true,
    serviceAbsent: () => Promise.resolve(false),
    addresses: [],
    clock: new FakeClock(),
    logger: memoryLogger('warn'),
  });
  return { w, patches };
}

test('a change that arrives while a pass is writing is written by one more pass', async () => {
  let release = (): void => {};
  const gate = new Promise<void>((r) => (release = r));
  let current = tableAt(1);
  const { w, patches } = writer({ table: () => current, gate });
  const first = w.sync();
  await new Promise((r) => setImmediate(r));
  assert.equal(patches.length, 1, 'the first pass is writing');
  current = tableAt(2);
  void w.sync();
  release();
  await first;
  for (let i = 0; i < 50 && patches.length < 2; i++) await new Promise((r) => setImmediate(r));
  assert.deepEqual(
    patches.map((p) => p.patch.status.conditions[0]!.observedGeneration),
    [1, 2],
  );
  w.close();
});

test('nothing is written from stale data', async () => {
  const { w, patches } = writer({ table: () => tableAt(1), stale: () => true });
  assert.equal(await w.sync(), 0);
  assert.equal(patches.length, 0);
  w.close();
});
