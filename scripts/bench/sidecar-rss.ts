// Resident memory of the real `outrigger proxy` (compiled, as the image runs it) in in-cluster
// mode against a real kube-apiserver, with 100 Services (1,000 endpoints) subscribed: the
// target is <= 90 MB idle. Each Service is subscribed the way traffic subscribes it, by one request
// through the egress listener; its endpoints are not ready, so the request is a 503 and nothing
// ever connects to their addresses. Tracing is on, exporting to a loopback
// OTLP sink, as in a real pod.
//
//   node scripts/bench/sidecar-rss.ts [--services 100] [--settle 5]
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { startCluster } from '../../test/harness/cluster.ts';
import { sidecarIdentity } from '../../test/harness/discovery.ts';
import { httpGet as get } from '../../test/harness/http-get.ts';
import { compiledBuild } from './build.ts';

const { values } = parseArgs({
  options: { services: { type: 'string', default: '100' }, settle: { type: 'string', default: '5' } },
});
const services = Math.min(500, Math.max(1, Number(values.services)));
const settleMs = Math.min(60, Math.max(1, Number(values.settle))) * 1000;
const PORTS = { egress: 18186, ingress: 18187, admin: 18188 };

const say = (s: string): boolean => process.stderr.write(`sidecar-rss: ${s}\n`);

async function until(what: string, cond: () => Promise<boolean>, limitMs = 30_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const metric = (text: string, name: string): number =>
  Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

const rssMb = (pid: number): number =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

const build = compiledBuild();
const sink = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
});
await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
say('starting the test cluster (scripts/test-cluster)');
const cluster = await startCluster();
if (!cluster) throw new Error('no test cluster: run scripts/test-cluster build first');
let child: ChildProcess | undefined;
try {
  const ns = await cluster.admin.createNamespace('rss');
  const id = await sidecarIdentity(cluster, ns);
  say(`creating ${services} Services with 10 endpoints each`);
  for (let i = 0; i < services; i++) {
    await cluster.admin.apply({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: `svc-${i}`, namespace: ns },
      spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }] },
    });
    await cluster.admin.apply({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `svc-${i}-a`, namespace: ns, labels: { 'kubernetes.io/service-name': `svc-${i}` } },
      addressType: 'IPv4',
      endpoints: Array.from({ length: 10 }, (_, j) => ({
        addresses: [`10.70.${i % 250}.${j + 1}`],
        conditions: { ready: false, serving: false, terminating: false },
      })),
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    });
  }
  const api = new URL(cluster.server);
  const rows: string[] = [];
  for (const flags of [[], ['--max-semi-space-size=4']]) {
    const c = spawn(
      process.execPath,
      [
        ...flags,
        build.main,
        'proxy',
        '--capture',
        'explicit',
        '--token-dir',
        id.dir,
        '--egress-port',
        String(PORTS.egress),
        '--ingress-port',
        String(PORTS.ingress),
        '--admin-port',
        String(PORTS.admin),
        '--trace-collector',
        `http://127.0.0.1:${(sink.address() as AddressInfo).port}/`,
        '--log-level',
        'warn',
      ],
      {
        env: { ...process.env, KUBERNETES_SERVICE_HOST: api.hostname, KUBERNETES_SERVICE_PORT: api.port },
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    );
    child = c;
    await until('readyz', async () => (await get(PORTS.admin, '/readyz')).status === 200);
    const idle = rssMb(c.pid ?? 0);
    for (let i = 0; i < services; i++) {
      const r = await get(PORTS.egress, '/', `svc-${i}.${ns}`);
      if (r.status !== 503) throw new Error(`svc-${i}: expected 503 (no ready endpoint), got ${r.status}`);
    }
    let subs = 0;
    await until('every subscription live', async () => {
      const m = (await get(PORTS.admin, '/metrics')).body;
      subs = metric(m, 'outrigger_discovery_subscriptions');
      return subs >= services && metric(m, 'outrigger_discovery_watches') >= 1;
    });
    await new Promise((r) => setTimeout(r, settleMs));
    const loaded = rssMb(c.pid ?? 0);
    rows.push(
      `| \`node ${[...flags, 'main.js proxy'].join(' ')}\` | ${idle.toFixed(1)} MB | ${loaded.toFixed(1)} MB (${subs} subscribed) |`,
    );
    c.kill('SIGTERM');
    await new Promise((r) => c.once('exit', r));
    child = undefined;
  }
  id.cleanup();
  process.stdout.write(
    `Node ${process.version}; ${services} Services x 10 endpoints; RSS ${settleMs / 1000} s after the last lookup\n\n` +
      `| process | RSS ready, nothing subscribed | RSS with ${services} Services subscribed |\n|---|---|---|\n` +
      rows.join('\n') +
      '\n',
  );
} finally {
  child?.kill('SIGKILL');
  sink.close();
  await cluster.stop();
}
