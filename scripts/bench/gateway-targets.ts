// The gateway's row in the benchmark, in front of the same backend as its peers (Skipper among
// them): `outrigger gateway` (compiled, as the image runs it) routing Host: gateway-bench through
// one Ingress to the backend's EndpointSlice. It reads them from a loopback stand-in for the API
// server (HTTPS, one list each, watches held open and silent), so no cluster is needed and the
// request path is exactly the production one. Tracing at the default 1% to the discarding sink.
import type { ChildProcess } from 'node:child_process';
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { httpGet } from '../../test/harness/http-get.ts';
import { selfSignedFor } from '../../test/harness/tls-certs.ts';
import { writeTokenDir } from '../../test/harness/token-dir.ts';
import type { BenchTarget } from './peers.ts';
import { benchPort } from './procs.ts';

export interface GatewayBenchEnv {
  dir: string;
  backendPort: number;
  main: string;
  launch(cmd: string, argv: string[], opts?: { env?: NodeJS.ProcessEnv }): ChildProcess;
}

const PORTS = {
  http: benchPort(30),
  https: benchPort(31),
  admin: benchPort(32),
  api: benchPort(33),
  sink: benchPort(15),
};

/** The objects the stand-in API server lists: one class, one Ingress, its Service and endpoints. */
function collections(backendPort: number): Record<string, unknown[]> {
  return {
    '/apis/networking.k8s.io/v1/ingressclasses': [
      {
        metadata: { name: 'outrigger', resourceVersion: '1' },
        spec: { controller: 'outrigger.dev/gateway' },
      },
    ],
    '/apis/networking.k8s.io/v1/ingresses': [
      {
        metadata: { name: 'bench', namespace: 'bench', resourceVersion: '1' },
        spec: {
          ingressClassName: 'outrigger',
          rules: [
            {
              host: 'gateway-bench',
              http: {
                paths: [
                  {
                    path: '/',
                    pathType: 'Prefix',
                    backend: { service: { name: 'backend', port: { number: 80 } } },
                  },
                ],
              },
            },
          ],
        },
      },
    ],
    '/api/v1/services': [
      {
        metadata: { name: 'backend', namespace: 'bench', resourceVersion: '1' },
        spec: {
          clusterIP: '10.96.0.60',
          ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 'http' }],
        },
      },
    ],
    '/apis/discovery.k8s.io/v1/namespaces/bench/endpointslices': [
      {
        metadata: {
          name: 'backend-1',
          namespace: 'bench',
          resourceVersion: '1',
          labels: { 'kubernetes.io/service-name': 'backend' },
        },
        addressType: 'IPv4',
        endpoints: [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
        ports: [{ name: 'http', port: backendPort, protocol: 'TCP' }],
      },
    ],
  };
}

/** A loopback HTTPS stand-in for the API server: lists answer at once, watches stay open and silent. */
function standInApi(env: GatewayBenchEnv): { caPem: string } {
  const pem = selfSignedFor('127.0.0.1', ['IP:127.0.0.1']);
  const items = collections(env.backendPort);
  const server = https.createServer({ cert: pem.cert, key: pem.key }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://127.0.0.1');
    const list = items[url.pathname];
    if (!list)
      return void res
        .writeHead(404, { 'content-type': 'application/json' })
        .end('{"kind":"Status","code":404}');
    res.writeHead(200, { 'content-type': 'application/json' });
    if (url.searchParams.get('watch') === '1') return void res.flushHeaders();
    res.end(JSON.stringify({ kind: 'List', metadata: { resourceVersion: '1' }, items: list }));
  });
  server.listen(PORTS.api, '127.0.0.1');
  process.once('exit', () => server.close());
  return { caPem: pem.cert };
}

async function readyz(port: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while ((await httpGet(port, '/readyz')).status !== 200) {
    if (Date.now() > deadline) throw new Error('bench: the gateway did not become ready');
    await new Promise((r) => setTimeout(r, 100));
  }
}

export function gatewayTargets(env: GatewayBenchEnv): BenchTarget[] {
  const out: BenchTarget[] = [];
  if (spawnSync(process.execPath, [env.main, 'gateway', '--help']).status === 0) {
    const { caPem } = standInApi(env);
    const tokenDir = path.join(env.dir, 'gateway-sa');
    mkdirSync(tokenDir, { recursive: true });
    writeTokenDir(tokenDir, { token: 'bench', caPem, namespace: 'bench' });
    out.push({
      name: 'outrigger gateway',
      port: PORTS.http,
      authority: 'gateway-bench',
      start: () => [
        env.launch(
          process.execPath,
          [
            '--max-semi-space-size=4',
            env.main,
            'gateway',
            '--token-dir',
            tokenDir,
            '--listen-host',
            '127.0.0.1',
            '--http-port',
            String(PORTS.http),
            '--https-port',
            String(PORTS.https),
            '--admin-port',
            String(PORTS.admin),
            '--trace-collector',
            `http://127.0.0.1:${PORTS.sink}/`,
            '--log-level',
            'warn',
          ],
          {
            env: {
              ...process.env,
              KUBERNETES_SERVICE_HOST: '127.0.0.1',
              KUBERNETES_SERVICE_PORT: String(PORTS.api),
            },
          },
        ),
      ],
      ready: () => readyz(PORTS.admin),
      note: 'HTTP listener, Host: gateway-bench -> Ingress rule -> EndpointSlice endpoint (the backend)',
    });
  }
  return out;
}
