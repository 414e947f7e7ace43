// An address per Gateway against the real API server (the fault proxy in front of it): two
// Gateways without hostnames on port 80, each with its own route for `/`
// (HTTPRouteMultipleGateways' case):
//   1. the gateway applies a Service per Gateway in its namespace, the Gateway's status address is
//      that Service's ClusterIP, and a request at each Gateway's pod port reaches its own route;
//   2. 500s, resets and stalls on the lists during relists: no Service changed, no request failed;
//   3. the API server stopped: each Gateway's port still served, also by a gateway restarted
//      during the outage (its snapshot);
//   4. the API server back: the Services are the same objects, and a listener added to a Gateway
//      gets a port on its Service and its routes there.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { serviceName } from '../../src/gateway/addresses.ts';
import { createService, createSlice, waitFor } from '../harness/discovery.ts';
import { startFaultProxy } from '../harness/fault-proxy.ts';
import { GATEWAY_NAMESPACE, gatewayPod, relistFaults, type GatewayPod } from '../harness/gateway.ts';
import { backendTo, gatewayApiCluster, httpRoute } from '../harness/gateway-api.ts';
import type { KubeAdmin } from '../harness/kube.ts';

const ONE = '10.244.0.111';
const TWO = '10.244.0.112';
const FLAGS = ['--gateway-api', 'true', '--pod-namespace', GATEWAY_NAMESPACE];

const gateway = (name: string, ports = [80]) => ({
  apiVersion: 'gateway.networking.k8s.io/v1',
  kind: 'Gateway',
  metadata: { name, namespace: GATEWAY_NAMESPACE },
  spec: {
    gatewayClassName: 'outrigger',
    listeners: ports.map((port) => ({
      name: `http-${port}`,
      port,
      protocol: 'HTTP',
      allowedRoutes: { namespaces: { from: 'All' } },
    })),
  },
});

const dedicated = (ns: string, parent: string) =>
  httpRoute(ns, `to-${parent}`, {
    parentRefs: [{ name: parent, namespace: GATEWAY_NAMESPACE }],
    rules: [{ backendRefs: [backendTo(parent)] }],
  });

interface Svc {
  metadata: { uid: string; resourceVersion: string };
  spec: { clusterIP: string; ports: { port: number; targetPort: number }[] };
}

const serviceOf = (admin: KubeAdmin, gw: string): Promise<Svc> =>
  admin.get<Svc>('Service', serviceName(`${GATEWAY_NAMESPACE}/${gw}`), GATEWAY_NAMESPACE);

/** The pod port of a Gateway's listener port, from its Service. */
const podPort = (svc: Svc, port = 80): number => svc.spec.ports.find((p) => p.port === port)!.targetPort;

async function eachOwnRoute(pod: GatewayPod, ports: { one: number; two: number }): Promise<void> {
  for (let i = 0; i < 5; i++) {
    assert.equal((await pod.get('http://any.example/', ports.one)).body, ONE, "Gateway one's route");
    assert.equal((await pod.get('http://any.example/', ports.two)).body, TWO, "Gateway two's route");
  }
}

test('gateway API: a Service per Gateway, its routes at its own port; kept through faults, an outage and a restart', async (t) => {
  const env = await gatewayApiCluster(t, 'gwaddr');
  if (!env) return;
  const { cluster, ns } = env;
  const admin = cluster.admin;
  for (const [name, ip] of [
    ['one', ONE],
    ['two', TWO],
  ] as const) {
    await createService(admin, ns, name);
    await createSlice(admin, ns, name, `${name}-a`, [ip]);
    await admin.apply(gateway(name));
    await admin.apply(dedicated(ns, name));
  }

  const proxy = await startFaultProxy({ target: cluster });
  t.after(() => proxy.stop());
  const pod = await gatewayPod(cluster, proxy.url);
  t.after(() => pod.close());
  for (const a of [ONE, TWO]) await pod.startBackend(a);
  let gw = await pod.startGateway(FLAGS);
  t.after(() => gw.stop('SIGKILL'));
  await waitFor('gateway ready', async () => (await pod.admin('/readyz')).status === 200, 30_000);

  const before: Record<string, Svc> = {};
  const ports = { one: 0, two: 0 };
  await t.test(
    "a Service per Gateway; the Gateway's address is its ClusterIP; its routes at its port",
    async () => {
      for (const name of ['one', 'two'] as const) {
        await waitFor(
          `Service of ${name}`,
          () =>
            serviceOf(admin, name).then(
              () => true,
              () => false,
            ),
          15_000,
        );
        before[name] = await serviceOf(admin, name);
        ports[name] = podPort(before[name]);
        await waitFor(
          `status address of ${name}`,
          async () => {
            const g = await admin.get<{ status?: { addresses?: { value: string }[] } }>(
              'Gateway',
              name,
              GATEWAY_NAMESPACE,
            );
            return g.status?.addresses?.[0]?.value === before[name]!.spec.clusterIP;
          },
          15_000,
        );
      }
      assert.notEqual(before.one!.spec.clusterIP, before.two!.spec.clusterIP);
      await eachOwnRoute(pod, ports);
    },
  );

  await t.test(
    '500s, resets and stalls on the lists during relists: no Service changed, no request failed',
    async () => {
      const load = (port: number) => pod.load(20, 12_000, ['http://any.example/'], port);
      const traffic = Promise.all([load(ports.one), load(ports.two)]);
      await relistFaults(
        proxy,
        /\/(gatewayclasses|gateways|httproutes|grpcroutes|referencegrants|services|endpointslices)(\?(?!.*watch=)|$)/,
      );
      for (const summary of await traffic)
        assert.equal(summary.failed, 0, JSON.stringify(summary.failures.slice(0, 5)));
      await eachOwnRoute(pod, ports);
      for (const name of ['one', 'two'] as const)
        assert.equal(
          (await serviceOf(admin, name)).metadata.resourceVersion,
          before[name]!.metadata.resourceVersion,
        );
    },
  );

  await t.test(
    "API server down: each Gateway's port served, also by a gateway restarted during the outage",
    async () => {
      await waitFor('snapshot written', () => existsSync(path.join(pod.snapshotDir, 'gateway.snap')), 15_000);
      await delay(2_500); // the debounced writer has caught up with the last change
      await cluster.apiserverStop();
      await eachOwnRoute(pod, ports);
      await gw.stop('SIGTERM');
      gw = await pod.startGateway(FLAGS);
      await waitFor(
        'restarted gateway ready',
        async () => (await pod.admin('/readyz')).status === 200,
        30_000,
      );
      await eachOwnRoute(pod, ports);
    },
  );

  await t.test(
    'API server back: the same Services; a listener added gets its port and its routes',
    async () => {
      await cluster.apiserverStart();
      await delay(3_000); // the gateway has relisted and applied what it had to
      for (const name of ['one', 'two'] as const) {
        const now = await serviceOf(admin, name);
        assert.equal(now.metadata.uid, before[name]!.metadata.uid, `${name}: the same Service`);
        assert.deepEqual(
          [now.spec.clusterIP, now.spec.ports],
          [before[name]!.spec.clusterIP, before[name]!.spec.ports],
        );
      }
      await admin.request(
        'PUT',
        `/apis/gateway.networking.k8s.io/v1/namespaces/${GATEWAY_NAMESPACE}/gateways/two`,
        {
          ...gateway('two', [80, 8080]),
          metadata: (await admin.get<{ metadata: unknown }>('Gateway', 'two', GATEWAY_NAMESPACE)).metadata,
        },
      );
      await waitFor(
        'port 8080 on two',
        async () => (await serviceOf(admin, 'two')).spec.ports.length === 2,
        30_000,
      );
      const on8080 = podPort(await serviceOf(admin, 'two'), 8080);
      await waitFor(
        'served at 8080',
        async () => (await pod.get('http://any.example/', on8080)).body === TWO,
        15_000,
      );
      await eachOwnRoute(pod, ports);
    },
  );
});
