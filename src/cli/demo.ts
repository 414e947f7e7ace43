import type { Server } from 'node:http';
import { createServer, request } from '../shared/node-http.ts';
import type { AddressInfo } from 'node:net';
import { Command } from 'commander';
import type { DataPath } from '../compose/data-path.ts';
import { loadConfig } from '../config/load.ts';
import { demoOptions, type DemoConfig } from '../config/person-options.ts';
import { appFile } from '../shared/app-root.ts';
import { systemClock } from '../shared/clock.ts';
import { createLogger } from '../shared/log.ts';
import { personTable } from './option-table.ts';

/**
 * `outrigger demo`: the whole data path on one machine, no cluster. Backends run on the loopback
 * addresses that manifests/demo/cluster.yaml lists, the sidecar reads that file as its discovery
 * source, and the demo plays the app: it sends traffic through the egress listener the way an app
 * with HTTP_PROXY does, and through the ingress listener the way another pod's sidecar does.
 */
const MANIFEST = appFile('manifests/demo/cluster.yaml');

/**
 * Above the 30 ms a balancer assumes of an endpoint it has not timed yet, so the slow pod's first
 * answer raises its estimate and P2C turns to the fast pod from then on; and above the stalls of a
 * busy laptop (the demo's app, sidecar and pods share one process: 100-220 ms measured under load).
 * Peak-EWMA takes a slower answer at once, so one stall on the fast pod that outlasts the slow pod's
 * delay would rightly turn traffic to the slow one for seconds.
 */
const SLOW_MS = 250;

interface Step {
  label: string;
  via: 'egress' | 'ingress';
  url: string;
  count: number;
  note: string;
  /**
   * Whether the note held for these results (retried: requests the sidecar retried meanwhile);
   * undefined when too few requests were sent to tell.
   */
  holds: (results: Outcome[], retried: number) => boolean | undefined;
}

const all = (results: Outcome[], f: (r: Outcome) => boolean): boolean => results.every(f);
const servedBy = (results: Outcome[], pod: string): number => results.filter((r) => r.pod === pod).length;

interface Outcome {
  status: number;
  pod: string;
  error: string;
  ms: number;
}

function backend(host: string, port: number, pod: string, delayMs = 0): Promise<Server> {
  const server = createServer((req, res) => {
    const reply = (): void => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-demo-pod': pod });
      res.end(JSON.stringify({ pod, path: req.url, forwardedFor: req.headers['x-forwarded-for'] }) + '\n');
    };
    if (delayMs > 0) setTimeout(reply, delayMs);
    else reply();
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

function send(port: number, url: string): Promise<Outcome> {
  const started = performance.now();
  const u = new URL(url);
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port, path: url.startsWith('http') ? url : u.pathname, headers: { host: u.host } },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            pod: String(res.headers['x-demo-pod'] ?? ''),
            error: String(res.headers['x-outrigger-error'] ?? ''),
            ms: performance.now() - started,
          }),
        );
      },
    );
    req.on('error', (e) =>
      resolve({ status: 0, pod: '', error: e.message, ms: performance.now() - started }),
    );
    req.end();
  });
}

const tally = (xs: string[]): string => {
  const m = new Map<string, number>();
  for (const x of xs) if (x) m.set(x, (m.get(x) ?? 0) + 1);
  return [...m].map(([k, n]) => `${k} x${n}`).join(', ') || '-';
};

function pct(ms: number[], p: number): string {
  const s = [...ms].sort((a, b) => a - b);
  return (s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0).toFixed(1);
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows
    .map((r, j) => {
      const line = r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd();
      return j === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
    })
    .join('\n');
}

async function metricSum(dp: DataPath, name: string): Promise<number> {
  const text = await dp.metrics.render();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name + '{') || l.startsWith(name + ' '))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

export interface DemoOptions {
  requests: number;
  out: (s: string) => void;
  /** Resolves when the user is done trying it by hand (--keep-running); the demo stays up until then. */
  keepRunning?: () => Promise<void>;
}

export async function runDemo(opts: DemoOptions): Promise<boolean> {
  const out = opts.out;
  // Loaded on use (src/cli/index.ts): every sidecar builds this command, only the demo runs it.
  const [{ createDataPath }, { createFileResolver }] = await Promise.all([
    import('../compose/data-path.ts'),
    import('../discovery/file-source.ts'),
  ]);
  const logs: string[] = [];
  const log = createLogger({ level: 'warn', write: (l) => logs.push(l) });
  const servers: Server[] = [];
  let dp: DataPath | undefined;
  const resolver = createFileResolver({ path: MANIFEST, clock: systemClock, logger: log });
  try {
    servers.push(await backend('127.0.0.11', 18080, 'greeter-7d9f-fast'));
    servers.push(await backend('127.0.0.12', 18080, 'greeter-7d9f-slow', SLOW_MS));
    servers.push(await backend('127.0.0.13', 18080, 'inventory-55c4-live'));
    const app = await backend('127.0.0.1', 0, 'this-pod-app');
    servers.push(app);
    const appPort = (app.address() as AddressInfo).port;
    for (let i = 0; i < 100 && !resolver.ready(); i++) await new Promise((r) => setTimeout(r, 50));
    const defaults = loadConfig({ env: {} });
    dp = createDataPath(
      { ...defaults, capture: 'explicit', egressPort: 0, ingressPort: 0, adminPort: 0, appPorts: [appPort] },
      {
        resolver,
        namespace: 'demo',
        log,
        hosts: { egress: '127.0.0.1', ingress: '127.0.0.1', admin: '127.0.0.1' },
      },
    );
    await dp.start();
    const ports = dp.ports();
    out(
      `Outrigger demo: sidecar on 127.0.0.1 (egress :${ports.egress}, ingress :${ports.ingress}, admin :${ports.admin})`,
    );
    out(`discovery: file source ${MANIFEST}\n`);
    const n = opts.requests;
    const steps: Step[] = [
      {
        label: 'http://greeter.demo/hello',
        via: 'egress',
        url: 'http://greeter.demo/hello',
        count: n,
        note: `P2C peak-EWMA: the fast pod gets most requests (the slow one answers in ${SLOW_MS} ms)`,
        // The first calls may go to either pod: only from a few on is "most" a claim.
        holds: (r) =>
          r.length < 4
            ? undefined
            : all(r, (x) => x.status === 200) && servedBy(r, 'greeter-7d9f-fast') > r.length / 2,
      },
      {
        label: 'http://inventory.demo/items',
        via: 'egress',
        url: 'http://inventory.demo/items',
        count: n,
        note: 'one endpoint refuses: retried elsewhere, then avoided',
        // Every request answered by the live pod, at least one refusal retried, and most
        // requests never tried the dead endpoint again.
        holds: (r, retried) =>
          r.length < 10
            ? undefined
            : all(r, (x) => x.status === 200 && x.pod === 'inventory-55c4-live') &&
              retried >= 1 &&
              retried < r.length / 2,
      },
      {
        label: 'http://orders.demo/',
        via: 'egress',
        url: 'http://orders.demo/',
        count: 3,
        note: 'no ready endpoint: 503 no_endpoints',
        holds: (r) => all(r, (x) => x.status === 503 && x.error === 'no_endpoints'),
      },
      {
        label: `http://127.0.0.1:${appPort}/`,
        via: 'egress',
        url: `http://127.0.0.1:${appPort}/`,
        count: 3,
        note: 'not a Service: passed through',
        holds: (r, retried) => retried === 0 && all(r, (x) => x.status === 200 && x.pod === 'this-pod-app'),
      },
      {
        label: '(from another pod) /orders',
        via: 'ingress',
        url: 'http://this-pod/orders',
        count: 5,
        note: 'ingress to the app on localhost',
        holds: (r) => all(r, (x) => x.status === 200 && x.pod === 'this-pod-app'),
      },
    ];
    const rows = [
      [
        'route',
        'via',
        'requests',
        'statuses',
        'served by',
        'proxy errors',
        'p50 ms',
        'p99 ms',
        'what it shows',
        'held',
      ],
    ];
    let ok = true;
    for (const step of steps) {
      const results: Outcome[] = [];
      const port = step.via === 'egress' ? ports.egress : ports.ingress;
      const retriesBefore = await metricSum(dp, 'outrigger_retries_total');
      for (let i = 0; i < step.count; i++) results.push(await send(port, step.url));
      const held = step.holds(results, (await metricSum(dp, 'outrigger_retries_total')) - retriesBefore);
      if (held === false) ok = false;
      rows.push([
        step.label,
        step.via,
        String(step.count),
        tally(results.map((r) => String(r.status))),
        tally(results.map((r) => r.pod)),
        tally(results.map((r) => r.error)),
        pct(
          results.map((r) => r.ms),
          50,
        ),
        pct(
          results.map((r) => r.ms),
          99,
        ),
        step.note,
        held === undefined ? 'too few requests to tell' : held ? 'yes' : 'NO',
      ]);
    }
    out(table(rows));
    const status = resolver.status();
    out('');
    out(
      `sidecar: ${await metricSum(dp, 'outrigger_retries_total')} retries, ` +
        `${await metricSum(dp, 'outrigger_upstream_connect_errors_total')} upstream connect errors, ` +
        `${await metricSum(dp, 'outrigger_endpoint_ejections_total')} ejections; ` +
        `discovery ready=${status.ready}, ${status.services.length} Services, ${status.staleServices} stale; ` +
        `${logs.length} warnings logged`,
    );
    out(
      ok
        ? '\ndemo finished: every route behaved as expected (each row\'s "held" column)'
        : '\ndemo finished: some routes did NOT behave as expected (see "held")',
    );
    if (opts.keepRunning) {
      out(tryItLines(ports.egress, ports.admin).join('\n'));
      await opts.keepRunning();
    } else {
      out('\nto send your own requests, keep the demo running:  npx outrigger demo --keep-running');
    }
    return ok;
  } finally {
    await dp?.close();
    await resolver.close();
    for (const s of servers) {
      s.close();
      s.closeAllConnections();
    }
  }
}

/** What to type while --keep-running holds the backends and the sidecar up. */
function tryItLines(egress: number, admin: number): string[] {
  return [
    '',
    'the demo keeps running: backends and the sidecar stay up until Ctrl-C. Try, in another shell:',
    `  curl -x http://127.0.0.1:${egress} http://greeter.demo/hello`,
    `  curl -x http://127.0.0.1:${egress} http://orders.demo/          # 503: no ready endpoint`,
    `  npx outrigger status --admin 127.0.0.1:${admin}`,
    `  curl http://127.0.0.1:${admin}/metrics`,
  ];
}

export function demoCommand(): Command {
  const cmd = new Command('demo').description(
    'the whole data path on one machine, no cluster: backends, the sidecar on the file source, traffic, a table',
  );
  return personTable<keyof typeof demoOptions, DemoConfig>(
    cmd,
    demoOptions,
    async ({ requests, keepRunning }) => {
      const ok = await runDemo({
        requests,
        out: (s) => process.stdout.write(s + '\n'),
        ...(keepRunning ? { keepRunning: untilSignal } : {}),
      });
      process.exitCode = ok ? 0 : 1;
    },
  );
}

function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
}
