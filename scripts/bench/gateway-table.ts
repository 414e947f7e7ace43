// Routing cost of the gateway as the number of Ingress rules grows: the time to build the route
// table (every Ingress change rebuilds it), the time of one host+path lookup, and the heap the
// table holds. Each Ingress has its own host and two Prefix paths; lookups cycle over 1,000 hosts.
//
//   node --expose-gc scripts/bench/gateway-table.ts [--sizes 10,100,1000,10000]
import { parseArgs } from 'node:util';
import { slimIngress, type Ingress } from '../../src/gateway/objects.ts';
import { RouteTable } from '../../src/gateway/table.ts';

const { values } = parseArgs({ options: { sizes: { type: 'string', default: '10,100,1000,10000' } } });
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

function ingresses(n: number): Ingress[] {
  const out: Ingress[] = [];
  for (let i = 0; i < n; i++)
    out.push(
      slimIngress({
        metadata: { name: `ing-${i}`, namespace: 'bench', creationTimestamp: '2026-01-01T00:00:00Z' },
        spec: {
          ingressClassName: 'outrigger',
          rules: [
            {
              host: `h${i}.example.com`,
              http: {
                paths: [
                  {
                    path: '/',
                    pathType: 'Prefix',
                    backend: { service: { name: `s${i}`, port: { number: 80 } } },
                  },
                  {
                    path: '/api/v1',
                    pathType: 'Prefix',
                    backend: { service: { name: `a${i}`, port: { number: 80 } } },
                  },
                ],
              },
            },
          ],
        },
      }),
    );
  return out;
}

const heap = (): number => {
  gc();
  return process.memoryUsage().heapUsed;
};

console.log('| Ingresses | rules | table build | lookup (mean of 1M) | table heap |');
console.log('|---|---|---|---|---|');
for (const n of (values.sizes ?? '').split(',').map(Number)) {
  const ings = ingresses(n);
  const before = heap();
  let t0 = process.hrtime.bigint();
  const table = new RouteTable(ings);
  let buildMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const held = heap() - before;
  for (let k = 0; k < 3; k++) {
    t0 = process.hrtime.bigint();
    new RouteTable(ings);
    buildMs = Math.min(buildMs, Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const hosts = Array.from({ length: 1000 }, (_, i) => `h${(i * 7919) % n}.example.com`);
  let hits = 0;
  for (let k = 0; k < 200_000; k++) if (table.lookup(hosts[k % 1000] ?? '', '/api/v1/users/42')) hits++;
  const N = 1_000_000;
  t0 = process.hrtime.bigint();
  for (let k = 0; k < N; k++) if (table.lookup(hosts[k % 1000] ?? '', '/api/v1/users/42')) hits++;
  const ns = Number(process.hrtime.bigint() - t0) / N;
  if (hits !== N + 200_000) throw new Error('a lookup missed');
  console.log(
    `| ${n} | ${table.routes} | ${buildMs.toFixed(2)} ms | ${ns.toFixed(0)} ns | ${(held / 1024).toFixed(0)} KiB |`,
  );
}
