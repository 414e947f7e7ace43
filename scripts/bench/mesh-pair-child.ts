// Two sidecars in one process for the mTLS benchmark rows: A (pod 127.0.0.1) calls B (pod
// 127.0.0.2), which delivers to the backend; the same data paths with and without mutual TLS, so
// the only difference between the rows is the mesh. In-process because two `outrigger proxy`
// processes on one host cannot both own the mesh port; CPU and RSS are the pair's.
// argv: <plain|mtls> <egressPort> <backendPort>. Prints "ready" once both serve.
import { createServer, type AddressInfo } from 'node:net';
import { createDataPath, type DataPathConfig } from '../../src/compose/data-path.ts';
import { FakeResolver } from '../../test/harness/fake-resolver.ts';
import { MeshTls } from '../../src/mesh/mesh-tls.ts';
import { meshWiring } from '../../src/mesh/wiring.ts';
import { systemClock } from '../../src/shared/clock.ts';
import { createLogger } from '../../src/shared/log.ts';
import { credentialsFor, fixedSources, testCa } from '../../test/harness/mesh.ts';
import { ep, service } from '../../test/unit/routing/fixtures.ts';

const [mode = 'plain', egressText = '0', backendText = '0'] = process.argv.slice(2);
const backendPort = Number(backendText);
const log = createLogger({ level: 'error' });
const config: DataPathConfig = {
  capture: 'explicit',
  egressPort: 0,
  ingressPort: 0,
  adminPort: 0,
  appPorts: [backendPort],
  clusterDomain: 'cluster.local',
  egressPolicy: 'allow-all',
  balancer: 'p2c-ewma',
  connectTimeoutMs: 1_000,
  requestTimeoutMs: 15_000,
  idleTimeoutMs: 60_000,
  retryStatuses: [],
};

async function freePort(host: string): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, host, r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const ca = await testCa();
const meshPort = await freePort('127.0.0.2');
const wiring = async (host: string, id: string) =>
  mode === 'mtls'
    ? {
        mesh: meshWiring({
          tls: new MeshTls(fixedSources(await credentialsFor(ca, id), ca.trustBundle), 'cluster.local'),
          meshPort,
          host,
          appHost: '127.0.0.1',
          allowFrom: () => [],
          mode: 'permissive',
          connectTimeoutMs: 1_000,
          clock: systemClock,
          log,
        }),
      }
    : {};
const pod = async (host: string, id: string, resolver: FakeResolver, egressPort: number) => {
  const dp = createDataPath(
    { ...config, egressPort },
    {
      resolver,
      namespace: 'bench',
      log,
      hosts: { egress: host, ingress: host, admin: host, app: '127.0.0.1' },
      discoveryWaitMs: 0,
      ...(await wiring(host, id)),
    },
  );
  await dp.start();
  return dp;
};
const b = await pod('127.0.0.2', 'spiffe://cluster.local/ns/bench/sa/b', new FakeResolver(), 0);
const resolverA = new FakeResolver();
// Plaintext: A -> B's ingress listener. mTLS: A -> the backend's port on B, dialled on B's mesh port.
const target = mode === 'mtls' ? ep('127.0.0.2', backendPort) : ep('127.0.0.2', b.ports().ingress);
resolverA.set(service('bench', 'two-hop', { eps: { http: [target] } }));
await pod('127.0.0.1', 'spiffe://cluster.local/ns/bench/sa/a', resolverA, Number(egressText));
process.stdout.write('ready\n');
process.once('SIGTERM', () => process.exit(0));
