// Explicit capture with real clients: the environment `outrigger inject` gives an app container in
// explicit mode, and nothing else, must send each client's plain-HTTP request for a Service name
// through the sidecar. The name (hello.demo) resolves nowhere but in the sidecar, so a client that
// ignores the environment fails. This backs the client table in docs/injection.md.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { runCli, startSidecar } from '../harness/cli.ts';
import { serviceYaml } from '../harness/tracing-relay.ts';
import { requireTool } from '../harness/tools.ts';

const clients = path.join(import.meta.dirname, 'clients');
const URL_ = 'http://hello.demo/';
const MARK = 'hello through the sidecar';

interface Client {
  name: string;
  tool: string;
  /** argv to run; the URL is the last argument. */
  argv: string[];
  timeoutMs?: number;
}

const node = process.execPath;
const CLIENTS: Client[] = [
  { name: 'curl', tool: 'curl', argv: ['curl', '-sS', '--max-time', '10', URL_] },
  {
    name: 'Python urllib',
    tool: 'python3',
    argv: [
      'python3',
      '-c',
      `import urllib.request,sys;print(urllib.request.urlopen(sys.argv[1]).read().decode())`,
      URL_,
    ],
  },
  {
    name: 'Node fetch',
    tool: node,
    argv: [node, '-e', 'fetch(process.argv[1]).then((r) => r.text()).then(console.log)', URL_],
  },
  {
    name: 'Node http.get',
    tool: node,
    argv: [
      node,
      '-e',
      "require('http').get(process.argv[1], (r) => { r.setEncoding('utf8'); r.on('data', (d) => process.stdout.write(d)); })",
      URL_,
    ],
  },
  {
    name: 'Java HttpClient',
    tool: 'java',
    argv: ['java', path.join(clients, 'Client.java'), URL_],
    timeoutMs: 60_000,
  },
  // A cold Go build cache makes the first `go run` take tens of seconds; later runs are fast.
  { name: 'Go net/http', tool: 'go', argv: ['go', 'run', '.', URL_], timeoutMs: 180_000 },
];

const PROXY_VARS = /^(https?_proxy|no_proxy|all_proxy|grpc_proxy|node_use_env_proxy|java_tool_options)$/i;

function has(tool: string): boolean {
  return spawnSync(tool, ['--version'], { stdio: 'ignore' }).error === undefined;
}

/** The env entries `outrigger inject` adds to the app container of a pod in explicit mode. */
async function injectedEnv(egressPort: number): Promise<Record<string, string>> {
  const pod =
    'apiVersion: v1\nkind: Pod\nmetadata: {name: app}\nspec:\n  containers: [{name: app, image: app}]\n';
  // The egress port is a sidecar setting: inject reads it from the environment, as the webhook does.
  const r = await runCli(
    ['inject', '-f', '-', '--capture', 'explicit', '--egress-port', String(egressPort)],
    {
      input: pod,
    },
  );
  assert.equal(r.status, 0, r.stderr);
  const out = parse(r.stdout) as {
    spec: { containers: { name: string; env?: { name: string; value?: string }[] }[] };
  };
  const app = out.spec.containers.find((c) => c.name === 'app');
  return Object.fromEntries((app?.env ?? []).map((e) => [e.name, e.value ?? '']));
}

function run(
  argv: string[],
  env: Record<string, string>,
  timeoutMs: number,
): Promise<{ code: number | null; out: string }> {
  const [cmd = '', ...args] = argv;
  const child = spawn(cmd, args, { cwd: clients, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return once(child, 'close').then(([code]) => {
    clearTimeout(timer);
    return { code: code as number | null, out };
  });
}

describe('explicit mode: real clients through the sidecar with the injected environment', () => {
  let env: Record<string, string> = {};
  const backend = createServer((_req, res) => res.end(MARK + '\n'));

  before(async () => {
    backend.listen(0, '127.0.0.1');
    await once(backend, 'listening');
    const backendPort = (backend.address() as AddressInfo).port;
    const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-clients-'));
    const cluster = path.join(dir, 'cluster.yaml');
    writeFileSync(cluster, serviceYaml('hello', 'demo', backendPort, '10.96.0.50'));
    const sidecar = await startSidecar({ after: (fn) => cleanups.push(fn) }, [
      '--source',
      `file:${cluster}`,
      '--namespace',
      'demo',
    ]);
    const base: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !PROXY_VARS.test(k)) base[k] = v;
    env = { ...base, ...(await injectedEnv(sidecar.egress)) };
  });

  const cleanups: (() => unknown)[] = [];
  after(async () => {
    for (const fn of cleanups) await fn();
    backend.close();
  });

  for (const client of CLIENTS) {
    test(client.name, async (t) => {
      if (!requireTool(t, has(client.tool), client.tool, `install ${client.tool} to check ${client.name}`))
        return;
      const r = await run(client.argv, env, client.timeoutMs ?? 30_000);
      assert.equal(r.code, 0, `${client.name} exited ${r.code}: ${r.out}`);
      assert.match(r.out, new RegExp(MARK));
    });
  }
});
