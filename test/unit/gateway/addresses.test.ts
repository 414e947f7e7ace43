// An address per Gateway: the pod ports every replica derives alike from the Gateways, the
// Services' names and shape, and the route table's answer for a request that came to one
// Gateway's address (HTTPRouteMultipleGateways: two Gateways without hostnames on one port, each
// with its own route for `/`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  assignPodPorts,
  POD_PORT_BASE,
  POD_PORT_SPAN,
  serviceFor,
  serviceName,
} from '../../../src/gateway/addresses.ts';
import { slimGateway, slimHTTPRoute } from '../../../src/routes/objects.ts';
import { GatewayRouteTable } from '../../../src/routes/table.ts';
import { CONTROLLER, gatewayClass, httpListener, req } from '../routes/fixtures.ts';

const gw = (name: string, created: string, listeners = [httpListener()]) =>
  slimGateway({
    metadata: { namespace: 'infra', name, creationTimestamp: created },
    spec: { gatewayClassName: 'outrigger', listeners },
  });

const dedicated = (name: string, parent: string, backend: string, created: string) =>
  slimHTTPRoute({
    metadata: { namespace: 'infra', name, creationTimestamp: created },
    spec: {
      parentRefs: [{ name: parent }],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/' } }],
          backendRefs: [{ name: backend, port: 8080 }],
        },
      ],
    },
  });

test('every replica derives the same pod port per Gateway and listener port, whatever the order', () => {
  const a = gw('same-namespace', '2026-01-01T00:00:00Z', [
    httpListener(),
    httpListener({ name: 'https', port: 443, protocol: 'HTTPS' }),
    httpListener({ name: 'tcp', port: 9000, protocol: 'TCP' }),
  ]);
  const b = gw('all-namespaces', '2026-01-02T00:00:00Z');
  const one = assignPodPorts([a, b]);
  assert.deepEqual(assignPodPorts([b, a]), one);
  assert.deepEqual(
    one.map((x) => [x.gateway, x.port, x.protocol]),
    [
      ['infra/same-namespace', 80, 'HTTP'],
      ['infra/same-namespace', 443, 'HTTPS'],
      ['infra/all-namespaces', 80, 'HTTP'],
    ],
    'HTTP and HTTPS listener ports only',
  );
  assert.equal(new Set(one.map((x) => x.podPort)).size, 3, 'a pod port of its own each');
  for (const x of one) assert.ok(x.podPort >= POD_PORT_BASE && x.podPort < POD_PORT_BASE + POD_PORT_SPAN);
});

test('two Gateways whose pod ports collide: the older keeps its port whatever else there is', () => {
  // Many Gateways: some hash to one port; the assignment stays unique and the oldest is unmoved.
  const many = Array.from({ length: 400 }, (_, i) =>
    gw(`g${i}`, `2026-01-01T00:00:${String(i % 60).padStart(2, '0')}Z`),
  );
  const all = assignPodPorts(many);
  assert.equal(new Set(all.map((x) => x.podPort)).size, all.length);
  const oldest = assignPodPorts([many[0]!])[0]!;
  assert.equal(all.find((x) => x.gateway === 'infra/g0')!.podPort, oldest.podPort);
});

test("a Gateway's Service: a valid, unique name; its ports map the listener ports to the pod ports", () => {
  const long = `infra/${'x'.repeat(200)}`;
  for (const key of ['infra/a-b', 'infra-b/a', 'c/a-b', 'b-c/a', long])
    assert.ok(serviceName(key).length <= 63);
  assert.notEqual(serviceName('c/a-b'), serviceName('b-c/a'), 'names that read alike are kept apart');
  assert.match(serviceName('infra/web.example'), /^outrigger-infra-web-example-[0-9a-f]{8}$/);
  const [b] = assignPodPorts([gw('edge', '2026-01-01T00:00:00Z')]);
  const svc = serviceFor('infra/edge', [b!], { namespace: 'outrigger-gateway', selector: { app: 'gw' } }) as {
    metadata: { namespace: string; labels: Record<string, string> };
    spec: { selector: unknown; ports: unknown[] };
  };
  assert.equal(svc.metadata.namespace, 'outrigger-gateway');
  assert.equal(svc.metadata.labels['gateway.networking.k8s.io/gateway-name'], 'edge');
  assert.deepEqual(svc.spec.selector, { app: 'gw' });
  assert.deepEqual(svc.spec.ports, [{ name: 'http-80', port: 80, targetPort: b!.podPort, protocol: 'TCP' }]);
});

test("a request at one Gateway's address matches only that Gateway's routes; the shared port all of them", () => {
  const t = new GatewayRouteTable({
    controller: CONTROLLER,
    classes: [gatewayClass()],
    gateways: [gw('same-namespace', '2026-01-01T00:00:00Z'), gw('all-namespaces', '2026-01-01T00:00:00Z')],
    routes: [
      dedicated('same-namespace-dedicated', 'same-namespace', 'v2', '2026-01-01T00:00:01Z'),
      dedicated('all-namespaces-dedicated', 'all-namespaces', 'v3', '2026-01-01T00:00:02Z'),
    ],
    grants: [],
  });
  const backendOf = (s: ReturnType<GatewayRouteTable['lookup']>) => {
    const b = s?.rule.backends[0];
    return b && 'target' in b ? b.target.name : undefined;
  };
  assert.equal(backendOf(t.lookupListener('infra/same-namespace', 80, 'x', req('/'))), 'v2');
  assert.equal(backendOf(t.lookupListener('infra/all-namespaces', 80, 'x', req('/'))), 'v3');
  assert.equal(
    t.lookupListener('infra/all-namespaces', 8080, 'x', req('/')),
    undefined,
    'no listener on 8080',
  );
  assert.equal(backendOf(t.lookup('http', 'x', req('/'))), 'v2', 'the shared port: the older route');
});
