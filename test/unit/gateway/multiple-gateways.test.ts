// The composed gateway with an address per Gateway (HTTPRouteMultipleGateways' case) on the
// in-memory API and real loopback backends: two Gateways without hostnames on port 80, each with
// its own route for `/`, and a route attached to both. Each Gateway gets a Service whose port 80
// maps to a pod port of its own; a request there reaches that Gateway's routes only; the Gateway's
// status address is its Service's ClusterIP; the shared port works as before.
import assert from 'node:assert/strict';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { startGateway, type Gateway } from '../../../src/compose/gateway.ts';
import { loadGatewayConfig } from '../../../src/config/gateway-options.ts';
import { CONTROLLER } from '../../../src/gateway/classes.ts';
import { FakeKubeApi } from '../../harness/fake-kube-api.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

type Obj = Parameters<FakeKubeApi['put']>[1];
const api = new FakeKubeApi();
const put = (path: string, o: unknown): void => api.put(path, o as Obj);
const GW = '/apis/gateway.networking.k8s.io/v1';
const servers: Server[] = [];
let gateway: Gateway;

async function backend(name: string): Promise<void> {
  const s = createServer((req, res) => {
    req.resume();
    res.end(name);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  servers.push(s);
  put('/api/v1/services', {
    metadata: { namespace: 'infra', name },
    spec: {
      clusterIP: '10.96.0.20',
      ports: [{ name: 'http', port: 8080, protocol: 'TCP', targetPort: 'http' }],
    },
  });
  put('/apis/discovery.k8s.io/v1/namespaces/infra/endpointslices', {
    metadata: { namespace: 'infra', name: `${name}-1`, labels: { 'kubernetes.io/service-name': name } },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
    ports: [{ name: 'http', port: (s.address() as AddressInfo).port, protocol: 'TCP' }],
  });
}

const route = (name: string, parents: string[], backendName: string, path: string, created: string) => ({
  kind: 'HTTPRoute',
  metadata: { namespace: 'infra', name, creationTimestamp: created },
  spec: {
    parentRefs: parents.map((p) => ({ name: p })),
    rules: [
      {
        matches: [{ path: { type: 'PathPrefix', value: path } }],
        backendRefs: [{ name: backendName, port: 8080 }],
      },
    ],
  },
});

before(async () => {
  for (const n of ['v1', 'v2', 'v3']) await backend(n);
  put(`${GW}/gatewayclasses`, {
    kind: 'GatewayClass',
    metadata: { name: 'outrigger' },
    spec: { controllerName: CONTROLLER },
  });
  for (const name of ['same-namespace', 'all-namespaces'])
    put(`${GW}/gateways`, {
      kind: 'Gateway',
      metadata: { namespace: 'infra', name, creationTimestamp: '2026-01-01T00:00:00Z' },
      spec: {
        gatewayClassName: 'outrigger',
        listeners: [
          { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
        ],
      },
    });
  for (const r of [
    route('shared', ['same-namespace', 'all-namespaces'], 'v1', '/shared', '2026-01-01T00:00:01Z'),
    route('same-namespace-dedicated', ['same-namespace'], 'v2', '/', '2026-01-01T00:00:02Z'),
    route('all-namespaces-dedicated', ['all-namespaces'], 'v3', '/', '2026-01-01T00:00:03Z'),
  ])
    put(`${GW}/httproutes`, r);
  const config = loadGatewayConfig({
    flags: {
      httpPort: '1',
      httpsPort: '1',
      adminPort: '1',
      listenHost: '127.0.0.1',
      gatewayApi: 'true',
      podNamespace: 'outrigger-gateway',
    },
  });
  gateway = await startGateway(
    { ...config, httpPort: 0, httpsPort: 0, adminPort: 0 },
    { api, log: memoryLogger('warn'), tuning: { discoveryWaitMs: 2_000 } },
  );
});

after(async () => {
  await gateway.close();
  for (const s of servers) s.close();
});

function get(port: number, path: string, host = 'any.example'): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve(`${res.statusCode} ${body}`));
    });
    req.on('error', reject);
    req.end();
  });
}

async function until<T>(what: string, f: () => T | undefined): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const v = f();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

interface AppliedService {
  metadata: { name: string; namespace: string };
  spec: { ports: { port: number; targetPort: number }[] };
}

/** The pod port of a Gateway's port 80, from the Service the gateway applied for it. */
const podPortOf = (gw: string): Promise<number> =>
  until(`the Service of ${gw}`, () => {
    const a = api.applied.find((x) => x.path.includes(`-infra-${gw}-`));
    return (a?.object as AppliedService | undefined)?.spec.ports.find((p) => p.port === 80)?.targetPort;
  });

test("each Gateway's address serves its own routes: the dedicated `/` of each, the shared route of both", async () => {
  const same = await podPortOf('same-namespace');
  const all = await podPortOf('all-namespaces');
  assert.notEqual(same, all);
  assert.equal(await get(same, '/'), '200 v2');
  assert.equal(await get(all, '/'), '200 v3');
  assert.equal(await get(same, '/shared'), '200 v1');
  assert.equal(await get(all, '/shared'), '200 v1');
});

test("the Services are applied in the gateway's namespace by its field manager; each Gateway's status address is its ClusterIP", async () => {
  await podPortOf('all-namespaces');
  for (const a of api.applied) {
    assert.match(a.path, /^\/api\/v1\/namespaces\/outrigger-gateway\/services\/outrigger-infra-/);
    assert.equal(a.fieldManager, 'outrigger-gateway');
  }
  const addressOf = (name: string) => {
    const patch = api.patches.filter((p) => p.path.endsWith(`/gateways/${name}/status`)).at(-1)?.patch as
      { status: { addresses?: { value: string }[] } } | undefined;
    return patch?.status.addresses?.[0]?.value;
  };
  const same = await until('the address of same-namespace', () => addressOf('same-namespace'));
  const all = await until('the address of all-namespaces', () => addressOf('all-namespaces'));
  assert.match(same, /^10\.96\.1\.\d+$/);
  assert.notEqual(same, all);
});

test('the shared port serves the routes of every Gateway, the older first, as before', async () => {
  assert.equal(await get(gateway.ports().http, '/'), '200 v2');
});
