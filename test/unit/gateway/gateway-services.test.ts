// The Gateways' Services on their own (a fake API, a fake clock): applied per Gateway with its
// ports, the ClusterIP learned as the Gateway's address; nothing written from last-known-good
// data; an API fault neither removes nor changes anything and is retried at the resync; a
// Gateway's Service is re-applied after a while (in case it was deleted by hand).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayServices } from '../../../src/gateway/gateway-services.ts';
import { RouteStatusWriter } from '../../../src/gateway/route-status.ts';
import { slimGateway } from '../../../src/routes/objects.ts';
import { GatewayRouteTable } from '../../../src/routes/table.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';
import { CONTROLLER, gatewayClass, httpListener } from '../routes/fixtures.ts';

const tableOf = (...names: string[]): GatewayRouteTable =>
  new GatewayRouteTable({
    controller: CONTROLLER,
    classes: [gatewayClass()],
    gateways: names.map((name) =>
      slimGateway({
        metadata: { namespace: 'infra', name },
        spec: { gatewayClassName: 'outrigger', listeners: [httpListener()] },
      }),
    ),
    routes: [],
    grants: [],
  });

interface Applied {
  path: string;
  object: {
    metadata: { name: string; namespace: string };
    spec: { ports: { port: number; targetPort: number }[] };
  };
}

function services(o: { table: () => GatewayRouteTable; stale?: () => boolean; down?: () => boolean }) {
  const clock = new FakeClock();
  const applied: Applied[] = [];
  let addressChanges = 0;
  const ips = new Map<string, string>();
  const s = new GatewayServices({
    api: {
      apply: (path, object) => {
        if (o.down?.()) return Promise.reject(new Error('connect ECONNREFUSED'));
        applied.push({ path, object: object as Applied['object'] });
        if (!ips.has(path)) ips.set(path, `10.96.0.${ips.size + 10}`);
        return Promise.resolve({ ...(object as object), spec: { clusterIP: ips.get(path) } });
      },
    },
    namespace: 'outrigger-gateway',
    selector: { app: 'gw' },
    table: o.table,
    stale: o.stale ?? (() => false),
    onAddress: () => addressChanges++,
    clock,
    logger: memoryLogger('error'),
    resyncMs: 30_000,
    reapplyMs: 300_000,
  });
  return { s, clock, applied, changes: () => addressChanges };
}

test("a Service per Gateway in the gateway's namespace; its ClusterIP is the Gateway's address", async () => {
  const { s, applied, changes } = services({ table: () => tableOf('a', 'b') });
  assert.equal(await s.sync(), 2);
  assert.deepEqual(
    applied.map((a) => a.object.metadata.namespace),
    ['outrigger-gateway', 'outrigger-gateway'],
  );
  assert.match(
    applied[0]!.path,
    /^\/api\/v1\/namespaces\/outrigger-gateway\/services\/outrigger-infra-a-[0-9a-f]{8}$/,
  );
  assert.equal(applied[0]!.object.spec.ports[0]!.port, 80);
  assert.notEqual(applied[0]!.object.spec.ports[0]!.targetPort, applied[1]!.object.spec.ports[0]!.targetPort);
  assert.deepEqual([s.addressOf('infra/a'), s.addressOf('infra/b')], ['10.96.0.10', '10.96.0.11']);
  assert.equal(changes(), 2);
  assert.equal(await s.sync(), 0, 'applied already: not again at every change');
  s.close();
});

test('last-known-good data writes no Service', async () => {
  const { s, applied } = services({ table: () => tableOf('a'), stale: () => true });
  assert.equal(await s.sync(), 0);
  assert.equal(applied.length, 0);
  s.close();
});

test('an API outage removes and changes nothing; the Service is applied when the API answers again', async () => {
  let down = false;
  let table = tableOf('a');
  const { s, clock, applied } = services({ table: () => table, down: () => down });
  await s.sync();
  const before = s.addressOf('infra/a');
  down = true;
  table = tableOf('a', 'b');
  assert.equal(await s.sync(), 0, 'nothing written while the API is down');
  assert.equal(s.addressOf('infra/a'), before, 'the address known is kept');
  assert.equal(s.addressOf('infra/b'), undefined);
  down = false;
  await clock.advance(30_000);
  assert.ok(s.addressOf('infra/b'), 'written at the resync');
  assert.deepEqual(
    applied.map((a) => a.object.metadata.name.replace(/-[0-9a-f]{8}$/, '')),
    ['outrigger-infra-a', 'outrigger-infra-b'],
    "a's Service not written again, b's once",
  );
  s.close();
});

test("a Gateway's Service is applied again after a while (recreated if someone deleted it)", async () => {
  const { s, clock, applied } = services({ table: () => tableOf('a') });
  await s.sync();
  await clock.advance(299_000);
  assert.equal(applied.length, 1);
  await clock.advance(31_000);
  assert.equal(applied.length, 2);
  s.close();
});

test('Gateway status: its own address once known, and until then the addresses written are left alone', async () => {
  const table = tableOf('a');
  const own: { address?: string } = {};
  const patches: { path: string; patch: { status: Record<string, unknown> } }[] = [];
  const w = new RouteStatusWriter({
    api: {
      mergePatch: (path, patch) => {
        patches.push({ path, patch: patch as (typeof patches)[number]['patch'] });
        return Promise.resolve();
      },
    },
    controller: CONTROLLER,
    table: () => table,
    statusOf: () => undefined,
    stale: () => false,
    secretUsable: () => true,
    serviceAbsent: () => Promise.resolve(false),
    addresses: ['192.0.2.1'],
    addressOf: () => own.address,
    clock: new FakeClock(),
    logger: memoryLogger('error'),
  });
  await w.sync();
  const gatewayPatch = () => patches.filter((p) => p.path.includes('/gateways/')).at(-1)!.patch.status;
  assert.equal('addresses' in gatewayPatch(), false, 'neither emptied nor the shared address');
  own.address = '10.96.0.10';
  await w.sync();
  assert.deepEqual(gatewayPatch().addresses, [{ type: 'IPAddress', value: '10.96.0.10' }]);
  w.close();
});
