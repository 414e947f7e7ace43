// Every error a first-hour user meets, through the real CLI (a child process): each says what
// failed, names the flag or file, and exits 2 when what the user gave is invalid (a flag, a
// variable, a file's content) or 1 when something could not be read or reached.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { runCli } from '../../harness/cli.ts';
import { freePort } from '../../harness/jaeger.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'outrigger-cli-'));

function kubeconfig(
  name: string,
  server: string,
  opts: { skipTls?: boolean; context?: string } = {},
): string {
  const file = path.join(dir, name);
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: c`,
      `  cluster: {server: '${server}'${opts.skipTls ? ', insecure-skip-tls-verify: true' : ''}}`,
      'users:',
      '- name: u',
      '  user: {token: abc}',
      'contexts:',
      '- name: dev',
      '  context: {cluster: c, user: u}',
      '- name: prod',
      '  context: {cluster: c, user: u}',
      `current-context: ${opts.context ?? 'dev'}`,
      '',
    ].join('\n'),
  );
  return file;
}

const closed = kubeconfig('closed.yaml', 'https://127.0.0.1:1', { skipTls: true });

test('resolve with an unreachable API server says so and exits 1 (flag and $KUBECONFIG)', async () => {
  for (const r of [
    await runCli(['resolve', 'web', '--kubeconfig', closed, '--wait', '2s']),
    await runCli(['resolve', 'web', '--wait', '2s'], { env: { KUBECONFIG: closed } }),
  ]) {
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /cannot reach the API server https:\/\/127\.0\.0\.1:1\/? \(.*ECONNREFUSED.*\)/);
    assert.doesNotMatch(r.stderr, /unsettled top-level await/);
  }
});

test('a kubeconfig without the current context names it and lists the contexts it has', async () => {
  const file = kubeconfig('noctx.yaml', 'https://127.0.0.1:1', { context: 'staging' });
  const r = await runCli(['resolve', 'web', '--kubeconfig', file]);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /context "staging".*dev, prod/);
  assert.match(r.stderr, new RegExp(file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
});

test('an http:// server in a kubeconfig gets an error that says what to change', async () => {
  const file = kubeconfig('http.yaml', 'http://127.0.0.1:1');
  const r = await runCli(['resolve', 'web', '--kubeconfig', file, '--wait', '1s']);
  assert.ok(r.status === 1 || r.status === 2, `exit ${r.status}: ${r.stderr}`);
  assert.doesNotMatch(r.stderr, /HTTP protocol is not allowed when skipTLSVerify/);
  assert.doesNotMatch(r.stderr, /unsettled top-level await/);
  assert.match(r.stderr, /http:\/\/127\.0\.0\.1:1/);
});

test('resolve --source file:MISSING shows the ENOENT with the path', async () => {
  const r = await runCli(['resolve', 'web', '--source', 'file:/nonexistent/cluster.yaml']);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /\/nonexistent\/cluster\.yaml.*(ENOENT|no such file)/);
});

test('proxy --source file:MISSING fails at start-up instead of running with nothing loaded', async () => {
  const r = await runCli(['proxy', '--capture', 'explicit', '--source', 'file:/nonexistent/cluster.yaml'], {
    timeoutMs: 10_000,
  });
  assert.equal(r.status, 1, `exit ${r.status}: ${r.stderr}`);
  assert.match(r.stderr, /--source.*\/nonexistent\/cluster\.yaml.*(ENOENT|no such file)/);
});

test('colliding listener ports are refused before start, naming both flags', async () => {
  const proxy = await runCli(
    [
      'proxy',
      '--capture',
      'explicit',
      '--source',
      'file:manifests/demo/cluster.yaml',
      '--egress-port',
      '7402',
    ],
    { timeoutMs: 10_000 },
  );
  assert.equal(proxy.status, 2, proxy.stderr);
  assert.match(proxy.stderr, /--egress-port.*--admin-port.*7402/);
  const ipt = await runCli(['iptables', '--dry-run', '--egress-port', '7400', '--ingress-port', '7400']);
  assert.equal(ipt.status, 2, ipt.stderr);
  assert.match(ipt.stderr, /--egress-port.*--ingress-port|--ingress-port.*--egress-port/);
  assert.equal(ipt.stdout, '');
});

test('demo --requests rejects what it cannot run, naming the flag and the range', async () => {
  for (const bad of ['abc', '0', '100000000']) {
    const r = await runCli(['demo', '--requests', bad]);
    assert.equal(r.status, 2, `--requests ${bad}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`--requests.*"${bad}".*integer from 1 to`));
  }
});

/** What `eval "$(scripts/test-cluster env)"` exports (with a node), as the README has users do. */
const testClusterEnv = { OUTRIGGER_CLUSTER_DIR: '/tmp/x', OUTRIGGER_NODE_NETNS: 'ortnode-1' };

test('a misspelled OUTRIGGER_* variable is warned about, naming the nearest valid one', async () => {
  const r = await runCli(['iptables', '--dry-run'], { env: { OUTRIGGER_EGRES_PORT: '7000' } });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /OUTRIGGER_EGRES_PORT.*OUTRIGGER_EGRESS_PORT/);
  const known = await runCli(['iptables', '--dry-run'], {
    env: { OUTRIGGER_EGRESS_PORT: '7000', OUTRIGGER_POD_IP: '10.0.0.1', ...testClusterEnv },
  });
  assert.equal(known.stderr, '', 'known variables draw no warning');
});

test('webhook certificate problems name the flag, the file and how to make one', async () => {
  const missing = await runCli(['webhook', '--https-port', '0', '--tls-cert', '/nonexistent/tls.crt']);
  assert.equal(missing.status, 1, missing.stderr);
  assert.match(missing.stderr, /--tls-cert \/nonexistent\/tls\.crt/);
  assert.match(missing.stderr, /scripts\/gen-webhook-certs/);
  const junk = path.join(dir, 'junk.pem');
  writeFileSync(junk, 'not a certificate\n');
  const bad = await runCli(['webhook', '--https-port', '0', '--tls-cert', junk, '--tls-key', junk]);
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, new RegExp(`${junk.replace(/\./g, '\\.')}.*PEM`));
});

test('iptables that cannot apply (not root, or no iptables) suggests --dry-run', async () => {
  const r = await runCli(['iptables', '--ipv6', 'off'], { env: { PATH: '/nonexistent' } });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /--dry-run/);
});

test('iptables reads its own options from OUTRIGGER_* variables too, and --no-ipv6 for one release', async () => {
  const dry = await runCli(['iptables'], { env: { OUTRIGGER_DRY_RUN: 'true', OUTRIGGER_IPV6: 'off' } });
  assert.equal(dry.status, 0, dry.stderr);
  assert.match(dry.stdout, /\(IPv4\)/);
  assert.doesNotMatch(dry.stdout, /\(IPv6\)/);
  const old = await runCli(['iptables', '--dry-run', '--no-ipv6']);
  assert.equal(old.status, 0, old.stderr);
  assert.doesNotMatch(old.stdout, /\(IPv6\)/);
  assert.match(old.stderr, /--no-ipv6 is deprecated .* use --ipv6 off/);
  const bad = await runCli(['iptables', '--dry-run'], { env: { OUTRIGGER_IPTABLES_MODE: 'bad' } });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /OUTRIGGER_IPTABLES_MODE="bad": expected one of plain, nft, legacy/);
});

test("usage errors exit 2 in every command (commander's own too), runtime failures 1", async () => {
  for (const args of [
    ['bogus'],
    ['resolve'],
    ['proxy', '--nope'],
    ['demo', '--requests'],
    ['inject'],
    ['status', '--admin'],
    ['inject', '-f', 'x.yaml', '--pod-security', 'nope'],
  ]) {
    const r = await runCli(args);
    assert.equal(r.status, 2, `${args.join(' ')}: exit ${r.status}: ${r.stderr}`);
    assert.match(r.stderr, /error:|outrigger:/);
  }
  const admin = await runCli(['status', '--admin', '127.0.0.1:1']);
  assert.equal(admin.status, 1, admin.stderr);
  assert.match(admin.stderr, /cannot reach the admin API at http:\/\/127\.0\.0\.1:1/);
  const file = await runCli(['inject', '-f', '/nonexistent/x.yaml']);
  assert.equal(file.status, 1, file.stderr);
  assert.match(file.stderr, /-f \/nonexistent\/x\.yaml: cannot read it \(ENOENT/);
});

test('a listener port held by another process is named by its flag', async (t) => {
  const holder = net.createServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  t.after(() => holder.close());
  const held = (holder.address() as net.AddressInfo).port;
  const [egress, ingress] = [await freePort(), await freePort()];
  const r = await runCli(
    [
      ...['proxy', '--capture', 'explicit', '--source', 'file:manifests/demo/cluster.yaml'],
      ...['--egress-port', String(egress), '--ingress-port', String(ingress), '--admin-port', String(held)],
    ],
    { timeoutMs: 15_000 },
  );
  assert.equal(r.status, 1, r.stderr);
  assert.match(
    r.stderr,
    new RegExp(`--admin-port ${held} \\(OUTRIGGER_ADMIN_PORT\\): the port is already in use`),
  );
});

test('a file a flag names that cannot be read exits 1 in every command (identity, webhook), as the README says', async () => {
  const identity = await runCli([
    'identity',
    '--ca-cert',
    '/nonexistent/ca.crt',
    '--ca-key',
    '/nonexistent/ca.key',
    '--https-port',
    '0',
    '--admin-port',
    'off',
  ]);
  assert.equal(identity.status, 1, identity.stderr);
  assert.match(identity.stderr, /--ca-cert \/nonexistent\/ca\.crt/);
  const webhook = await runCli(['webhook', '--https-port', '0', '--tls-cert', '/nonexistent/tls.crt']);
  assert.equal(webhook.status, 1, webhook.stderr);
});

test('resolve takes -n for --namespace, as inject and status do', async () => {
  const file = path.join(dir, 'resolve-n.yaml');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Service',
      'metadata: {name: web, namespace: shop}',
      'spec: {clusterIP: 10.96.0.20, ports: [{name: http, port: 80}]}',
      '---',
      'apiVersion: discovery.k8s.io/v1',
      'kind: EndpointSlice',
      'metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}',
      'addressType: IPv4',
      'ports: [{name: http, port: 8080}]',
      'endpoints: [{addresses: [10.1.0.5], conditions: {ready: true}}]',
      '',
    ].join('\n'),
  );
  const r = await runCli(['resolve', '-n', 'shop', 'web', '--source', `file:${file}`]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /10\.1\.0\.5/);
});

test('a kubeconfig that cannot be read exits 1 in every command that reads one; a malformed one exits 2', async () => {
  const junk = path.join(dir, 'junk-kubeconfig.yaml');
  writeFileSync(junk, 'clusters: [unclosed\n');
  for (const args of [['install'], ['uninstall'], ['resolve', 'web'], ['status', '-A'], ['version']]) {
    const missing = await runCli([...args, '--kubeconfig', '/nonexistent/kubeconfig']);
    assert.equal(missing.status, 1, `${args[0]}: ${missing.stderr}`);
    assert.match(missing.stderr, /--kubeconfig \/nonexistent\/kubeconfig: .*ENOENT/, args[0]);
    const malformed = await runCli([...args, '--kubeconfig', junk]);
    assert.equal(malformed.status, 2, `${args[0]}: ${malformed.stderr}`);
  }
});

test('a renamed flag still works through the real CLI, with one warning naming its new spelling', async () => {
  const r = await runCli(
    [
      'proxy',
      '--capture',
      'explicit',
      '--source',
      'file:manifests/demo/cluster.yaml',
      '--connect-timeout-ms',
      '250',
    ],
    { timeoutMs: 10_000, env: { OUTRIGGER_DRAIN_SECONDS: '0', OUTRIGGER_EGRESS_PORT: '7402' } },
  );
  // The listener ports collide, so it stops after reading (and warning about) every option.
  assert.equal(r.status, 2, r.stderr);
  assert.deepEqual(
    r.stderr.split('\n').filter((l) => l.includes('deprecated')),
    [
      'outrigger: warning: --connect-timeout-ms is deprecated and goes in the next release; use --connect-timeout',
      'outrigger: warning: OUTRIGGER_DRAIN_SECONDS is deprecated and goes in the next release; use OUTRIGGER_DRAIN_DURATION',
    ],
  );
});

test("install's --cert-days and resolve's --wait-ms are --cert-ttl and --wait, durations like every other", async () => {
  const warning = (old: string, now: string): string =>
    `outrigger: warning: ${old} is deprecated and goes in the next release; use ${now}`;
  const home = { HOME: dir };
  const oldTtl = await runCli(['install', '--cert-days', '30'], { env: home });
  assert.equal(oldTtl.status, 0, oldTtl.stderr);
  assert.ok(oldTtl.stderr.includes(warning('--cert-days', '--cert-ttl')), oldTtl.stderr);
  const ttl = await runCli(['install', '--cert-ttl', '720h'], { env: home });
  assert.equal(ttl.status, 0, ttl.stderr);
  assert.doesNotMatch(ttl.stderr, /deprecated/);
  const short = await runCli(['install', '--cert-ttl', '1h'], { env: home });
  assert.equal(short.status, 2, short.stderr);
  assert.match(short.stderr, /invalid flag --cert-ttl="1h": expected a duration .* from 24h to 3650d/);
  const source = ['--source', 'file:manifests/demo/cluster.yaml', '-n', 'demo'];
  const oldWait = await runCli(['resolve', 'nothing', ...source, '--wait-ms', '10']);
  assert.equal(oldWait.status, 1, oldWait.stderr);
  assert.ok(oldWait.stderr.includes(warning('--wait-ms', '--wait')), oldWait.stderr);
  const wait = await runCli(['resolve', 'nothing', ...source, '--wait', '5000']);
  assert.equal(wait.status, 2, wait.stderr);
  assert.match(wait.stderr, /invalid flag --wait="5000": expected a duration such as 500ms/);
});
