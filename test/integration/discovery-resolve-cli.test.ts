import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { createServices, discoveryCluster } from '../harness/discovery.ts';
import { repoRoot } from '../harness/tools.ts';

const outrigger = (args: string[]) =>
  spawnSync(process.execPath, [join(repoRoot, 'src/main.ts'), 'resolve', ...args], {
    encoding: 'utf8',
    timeout: 30_000,
  });

test('outrigger resolve answers from a real API server through a kubeconfig', async (t) => {
  const env = await discoveryCluster(t, 'cli');
  if (!env) return;
  const { cluster, ns } = env;
  await createServices(cluster.admin, ns, 2, (i) => [`10.80.${i}.1`, `10.80.${i}.2`]);
  const kc = ['--kubeconfig', cluster.kubeconfigPath];

  const json = outrigger([`svc-1.${ns}:http`, '--json', ...kc]);
  assert.equal(json.status, 0, json.stderr);
  const out = JSON.parse(json.stdout) as {
    key: { name: string };
    endpoints: Record<string, { address: string; port: number }[]>;
    freshness: { state: string };
    source: string;
  };
  assert.equal(out.key.name, 'svc-1');
  assert.deepEqual(
    out.endpoints.http?.map((e) => `${e.address}:${e.port}`),
    ['10.80.1.1:8080', '10.80.1.2:8080'],
  );
  assert.equal(out.freshness.state, 'fresh');
  assert.equal(out.source, 'api');

  const text = outrigger([`svc-0.${ns}.svc.cluster.local`, ...kc]);
  assert.equal(text.status, 0, text.stderr);
  assert.match(text.stdout, /port http 80\/TCP: 2 endpoint\(s\)/);
  assert.match(text.stdout, /10\.80\.0\.1:8080 {2}ready/);

  const missing = outrigger([`nope.${ns}`, ...kc]);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /does not exist/);
  const badPort = outrigger([`svc-0.${ns}:grpc`, ...kc]);
  assert.equal(badPort.status, 1);
  assert.match(badPort.stderr, /has no port grpc; ports: http\(80\)/);
});
