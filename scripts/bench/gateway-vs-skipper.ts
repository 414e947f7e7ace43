// `outrigger gateway` and Skipper side by side, reading the same Ingresses from the same real
// kube-apiserver through the same fault proxy, serving the same backends (pod IPs in a network
// namespace), under the same faults at the same moments:
//   1. relists forced by 410s while Ingress, Service and EndpointSlice lists fail (500, reset, stall);
//   2. the API server stopped;
//   3. both restarted during the outage;
//   4. the API server back, one Ingress changed.
// Skipper (v0.23.0, built from its Go module) reads the API through `kubectl proxy`, as its docs
// show for out-of-cluster runs; the gateway with its own ServiceAccount token and RBAC.
//
//   node scripts/bench/gateway-vs-skipper.ts [--skipper PATH] [--outage-seconds 8]
// Prints a Markdown table. A script, not a test: Skipper's behaviour is reported, not asserted.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { startCluster } from '../../test/harness/cluster.ts';
import { startFaultProxy } from '../../test/harness/fault-proxy.ts';
import {
  applyGatewayRbac,
  backendsOf,
  createScenario,
  gatewayPod,
  gatewayStatus,
  moveH1ToSvc3,
  relistFaults,
  SCENARIO,
  type GatewayPod,
} from '../../test/harness/gateway.ts';
import { bridgeIntoNetns, waitForPort } from '../../test/harness/netns.ts';
import { exited } from '../../test/harness/netns-pod.ts';
import { testBinaries } from '../../test/harness/tools.ts';

const { values } = parseArgs({
  options: {
    'outage-seconds': { type: 'string', default: '8' },
    skipper: {
      type: 'string',
      default: path.join(homedir(), '.cache/outrigger-testbins/bin/skipper-v0.23.0-go1.26.8/skipper'),
    },
  },
});
const skipperBin = values.skipper ?? '';
if (!existsSync(skipperBin)) throw new Error(`no Skipper binary at ${skipperBin} (--skipper PATH)`);
const kubectl = testBinaries().kubectl;
const OUTAGE_MS = Math.min(600, Math.max(1, Number(values['outage-seconds']))) * 1000;

const SKIPPER_PORT = 19090;
const KUBECTL_PROXY_IN_POD = 18001;
const GATEWAY_PORT = 18080;

interface Row {
  phase: string;
  gateway: string;
  skipper: string;
}
const rows: Row[] = [];
const log = (msg: string): void => void process.stderr.write(`[${new Date().toISOString()}] ${msg}\n`);

/** How many of the URLs answer 200 through a proxy port, one GET each. */
async function sweep(pod: GatewayPod, urls: string[], port: number): Promise<number> {
  let ok = 0;
  for (const u of urls) if ((await pod.get(u, port)).status === 200) ok++;
  return ok;
}

async function main(): Promise<void> {
  const cluster = await startCluster();
  if (!cluster) throw new Error('no test cluster');
  const dir = mkdtempSync(path.join(tmpdir(), 'gw-vs-skipper-'));
  const children: ChildProcess[] = [];
  let pod: GatewayPod | undefined;
  const proxy = await startFaultProxy({ target: cluster });
  try {
    await applyGatewayRbac(cluster.admin);
    const { ns, urls } = await createScenario(cluster.admin);

    // kubectl proxy for Skipper, with the admin kubeconfig pointed at the fault proxy.
    const kubeconfig = path.join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      readFileSync(cluster.kubeconfigPath, 'utf8').replace(/server: \S+/, `server: ${proxy.url}`),
    );
    const kp = spawn(kubectl, ['--kubeconfig', kubeconfig, 'proxy', '--port=0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(kp);
    const kpPort = await new Promise<number>((resolve, reject) => {
      kp.stdout.on('data', (d: Buffer) => {
        const m = /127\.0\.0\.1:(\d+)/.exec(d.toString());
        if (m) resolve(Number(m[1]));
      });
      kp.once('exit', (c) => reject(new Error(`kubectl proxy exited ${c}`)));
    });

    pod = await gatewayPod(cluster, proxy.url);
    const p = pod;
    const bridge = await bridgeIntoNetns(p.ns, { host: '127.0.0.1', port: kpPort }, KUBECTL_PROXY_IN_POD);
    for (let k = 0; k < SCENARIO.services; k++) for (const a of backendsOf(k)) await p.startBackend(a);

    let gateway = await p.startGateway();
    const startSkipper = async (): Promise<ChildProcess> => {
      const child = p.ns.spawn([
        skipperBin,
        '-kubernetes',
        `-kubernetes-url=http://127.0.0.1:${KUBECTL_PROXY_IN_POD}`,
        '-kubernetes-ingress-class=outrigger',
        '-enable-kubernetes-endpointslices',
        `-address=127.0.0.1:${SKIPPER_PORT}`,
        '-support-listener=127.0.0.1:19911',
        '-wait-for-healthcheck-interval=0s',
        '-access-log-disabled',
        '-application-log-level=WARN',
      ]);
      child.stderr?.resume();
      child.stdout?.resume();
      await waitForPort(p.ns, '127.0.0.1', SKIPPER_PORT, 30_000);
      return child;
    };
    let skipper = await startSkipper();
    const ready = async (port: number): Promise<boolean> => (await sweep(p, urls, port)) === urls.length;
    for (let i = 0; i < 60 && !((await ready(GATEWAY_PORT)) && (await ready(SKIPPER_PORT))); i++)
      await delay(1_000);
    rows.push({
      phase: `routes served at start (of ${urls.length})`,
      gateway: String(await sweep(p, urls, GATEWAY_PORT)),
      skipper: String(await sweep(p, urls, SKIPPER_PORT)),
    });

    // 1. Faults on relists, both under the same traffic at the same time.
    log('faults');
    const load = (port: number, ms: number) => p.load(20, ms, urls, port);
    const faultTraffic = [load(GATEWAY_PORT, 14_000), load(SKIPPER_PORT, 14_000)] as const;
    await relistFaults(proxy);
    const [gf, sf] = await Promise.all(faultTraffic);
    rows.push({
      phase: 'failed requests during faulty relists',
      gateway: `${gf.failed} / ${gf.total}`,
      skipper: `${sf.failed} / ${sf.total}`,
    });
    rows.push({
      phase: `routes served after the faults (of ${urls.length})`,
      gateway: String(await sweep(p, urls, GATEWAY_PORT)),
      skipper: String(await sweep(p, urls, SKIPPER_PORT)),
    });
    await delay(4_000); // both resynced; the gateway's snapshot written

    // 2. API server stopped.
    log('outage');
    await cluster.apiserverStop();
    const [go, so] = await Promise.all([load(GATEWAY_PORT, OUTAGE_MS), load(SKIPPER_PORT, OUTAGE_MS)]);
    rows.push({
      phase: `failed requests, API server stopped (${OUTAGE_MS / 1000} s of traffic)`,
      gateway: `${go.failed} / ${go.total}`,
      skipper: `${so.failed} / ${so.total}`,
    });

    // 3. Both restarted while the API server is down.
    log('restart during the outage');
    await gateway.stop('SIGTERM');
    skipper.kill('SIGTERM');
    await exited(skipper);
    gateway = await p.startGateway();
    skipper = await startSkipper();
    await delay(5_000);
    const gs = await gatewayStatus(p);
    rows.push({
      phase: `routes served after a restart during the outage (of ${urls.length})`,
      gateway: String(await sweep(p, urls, GATEWAY_PORT)),
      skipper: String(await sweep(p, urls, SKIPPER_PORT)),
    });
    const [gr, sr] = await Promise.all([load(GATEWAY_PORT, 5_000), load(SKIPPER_PORT, 5_000)]);
    rows.push({
      phase: 'failed requests after that restart',
      gateway: `${gr.failed} / ${gr.total}`,
      skipper: `${sr.failed} / ${sr.total}`,
    });
    log(`gateway after restart: ${JSON.stringify(gs)}`);

    // 4. API server back; one Ingress changed: h1's `/` moves to svc-3.
    log('API back');
    await cluster.apiserverStart();
    const back = Date.now();
    await moveH1ToSvc3(cluster.admin, ns);
    const appliedAfter = async (port: number): Promise<string> => {
      while (Date.now() - back < 60_000) {
        if (backendsOf(3).includes((await p.get('http://h1.example.com/', port)).body))
          return `${Date.now() - back} ms`;
        await delay(50);
      }
      return 'not within 60 s';
    };
    const [ga, sa] = await Promise.all([appliedAfter(GATEWAY_PORT), appliedAfter(SKIPPER_PORT)]);
    rows.push({ phase: 'Ingress change served, after the API server is back', gateway: ga, skipper: sa });

    gateway.process.kill('SIGKILL');
    skipper.kill('SIGKILL');
    await bridge.close();
  } finally {
    for (const c of children) c.kill('SIGKILL');
    await pod?.close();
    await proxy.stop();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log('| phase | outrigger gateway | Skipper v0.23.0 |');
  console.log('|---|---|---|');
  for (const r of rows) console.log(`| ${r.phase} | ${r.gateway} | ${r.skipper} |`);
}

await main();
