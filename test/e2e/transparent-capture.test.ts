// Transparent capture for real: `outrigger iptables` loads its rules into a pod's network
// namespace, and a server running as the proxy's UID reads each redirected connection's original
// destination with getsockopt(SO_ORIGINAL_DST), IPv4 and IPv6. A second namespace plays the rest
// of the cluster over a veth pair. Nothing touches the host namespace.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import path from 'node:path';
import type { EchoReport } from '../harness/capture-echo.ts';
import { createNetns, linkNetns, netnsUnavailable, requireNetns, waitForPort } from '../harness/netns.ts';
import type { Netns } from '../harness/netns.ts';
import { repoRoot } from '../harness/tools.ts';

const PROXY_UID = 2102;
const APP_UID = 1000;
/** The sidecar's listeners, for the loop guard. */
const OWN = [7400, 7401, 7402];
const echo = path.join(repoRoot, 'test/harness/capture-echo.ts');
const main = path.join(repoRoot, 'src/main.ts');
const node = process.execPath;

const POD4 = '10.244.0.5';
const PEER4 = '10.244.0.1';
const POD6 = 'fd00:10:244::5';
const PEER6 = 'fd00:10:244::1';

async function dial(ns: Netns, host: string, port: number, uid = APP_UID): Promise<EchoReport> {
  const r = await ns.exec([node, echo, 'dial', host, String(port)], { uid, timeoutMs: 10_000 });
  return JSON.parse(r.stdout) as EchoReport;
}

/** What the echo server saw: which listener took the connection and what it was meant for. */
function expectReport(r: EchoReport, listener: number, original: EchoReport['original'], own: boolean): void {
  assert.equal(r.listener, listener);
  assert.deepEqual(r.original, original);
  assert.equal(r.ownListener, own);
}

async function startEcho(ns: Netns, ports: number[], uid?: number): Promise<void> {
  const child = ns.spawn([node, echo, 'serve', '::', ports.join(','), OWN.join(',')], { uid });
  child.stderr?.on('data', (d: Buffer) => process.stderr.write(d));
  for (const port of ports) await waitForPort(ns, '127.0.0.1', port);
}

/** The init step as the injector runs it, with exclusions the tests below check. */
const applyRules = (ns: Netns) =>
  ns.exec([
    node,
    main,
    'iptables',
    '--exclude-outbound-ports',
    '5432',
    '--exclude-inbound-ports',
    '9090',
    '--exclude-outbound-cidrs',
    '10.250.0.0/16',
  ]);

const tools = ['iptables', 'ip6tables', 'iptables-restore', 'ip6tables-restore', 'setpriv'] as const;

describe('transparent capture in a pod network namespace', () => {
  let pod: Netns;
  let peer: Netns;
  const unavailable = netnsUnavailable([...tools]);

  before(async () => {
    if (unavailable) return;
    pod = await createNetns('pod');
    peer = await createNetns('peer');
    await linkNetns(pod, peer, {
      a: [`${POD4}/24`, `${POD6}/64`],
      b: [`${PEER4}/24`, `${PEER6}/64`],
      defaultRoutes: true,
    });
    await applyRules(pod);
    // 7400/7401/7402 are the sidecar's listeners, 9090 an app port that bypasses it.
    await startEcho(pod, [7400, 7401, 7402, 9090, 8080], PROXY_UID);
    await startEcho(peer, [80, 5432, 9000]); // root: port 80 is privileged
  });
  after(async () => {
    await pod?.remove();
    await peer?.remove();
  });

  test('the tools are there (under CI=true a missing one fails)', (t) => {
    requireNetns(t, [...tools]);
  });

  test('outbound TCP from the app is redirected to egress with its original destination (IPv4)', async (t) => {
    if (!requireNetns(t, [...tools])) return;
    expectReport(await dial(pod, '10.96.0.10', 80), 7400, { address: '10.96.0.10', port: 80 }, false);
  });

  test('outbound TCP from the app is redirected to egress with its original destination (IPv6)', async (t) => {
    if (!requireNetns(t, [...tools])) return;
    expectReport(
      await dial(pod, 'fd00:10:96::a', 8080),
      7400,
      { address: 'fd00:10:96::a', port: 8080 },
      false,
    );
  });

  test("the proxy's own UID goes out unredirected (kernel-side loop guard)", async (t) => {
    if (!requireNetns(t, [...tools])) return;
    const r = await dial(pod, PEER4, 80, PROXY_UID);
    assert.equal(r.listener, 80);
    assert.equal(r.local.address.replace('::ffff:', ''), PEER4);
    const r6 = await dial(pod, PEER6, 80, PROXY_UID);
    assert.equal(r6.listener, 80);
  });

  test('excluded outbound ports and CIDRs bypass the sidecar', async (t) => {
    if (!requireNetns(t, [...tools])) return;
    assert.equal((await dial(pod, PEER4, 5432)).listener, 5432);
    assert.equal((await dial(pod, PEER6, 5432)).listener, 5432);
    // 10.250.0.0/16 is excluded: the connection leaves unredirected and nothing answers there.
    const r = await pod.exec([node, echo, 'dial', '10.250.0.1', '80', '500'], {
      uid: APP_UID,
      allowFail: true,
      timeoutMs: 10_000,
    });
    assert.notEqual(r.code, 0);
    assert.equal(r.stdout, '');
  });

  test('loopback traffic is never captured', async (t) => {
    if (!requireNetns(t, [...tools])) return;
    const r = await dial(pod, '127.0.0.1', 8080);
    assert.equal(r.listener, 8080);
  });

  test('inbound TCP is redirected to ingress with its original destination (IPv4 and IPv6)', async (t) => {
    if (!requireNetns(t, [...tools])) return;
    expectReport(await dial(peer, POD4, 8080), 7401, { address: POD4, port: 8080 }, false);
    expectReport(await dial(peer, POD6, 8080), 7401, { address: POD6, port: 8080 }, false);
  });

  test('the admin port and excluded inbound ports are not redirected', async (t) => {
    if (!requireNetns(t, [...tools])) return;
    assert.equal((await dial(peer, POD4, 9090)).listener, 9090);
    // A known pitfall: unredirected, SO_ORIGINAL_DST still answers with the
    // socket's own address, which the loop guard must recognise as one of our listeners.
    expectReport(await dial(peer, POD4, 7402), 7402, { address: POD4, port: 7402 }, true);
  });

  test('a direct connection to a listener is flagged by the loop guard', async (t) => {
    if (!requireNetns(t, [...tools])) return;
    expectReport(await dial(pod, '127.0.0.1', 7400), 7400, { address: '127.0.0.1', port: 7400 }, true);
  });

  test('rerunning `outrigger iptables` is idempotent', async (t) => {
    if (!requireNetns(t, [...tools])) return;
    const count = async (bin: string): Promise<number> =>
      (await pod.exec([bin, '-t', 'nat'])).stdout.split('\n').filter((l) => l.startsWith('-A ')).length;
    const before4 = await count('iptables-save');
    const before6 = await count('ip6tables-save');
    await applyRules(pod);
    assert.equal(await count('iptables-save'), before4);
    assert.equal(await count('ip6tables-save'), before6);
    assert.equal(before4, 9);
    assert.equal(before6, 8);
    // And the capture still works after the rerun.
    assert.equal((await dial(pod, '10.96.0.10', 80)).listener, 7400);
  });
});

describe('outrigger iptables --iptables-mode', () => {
  test('legacy loads the rules through the legacy backend, and only there', async (t) => {
    if (!requireNetns(t, ['iptables-legacy-restore'])) return;
    const ns = await createNetns('legacy', { t });
    await ns.exec([node, main, 'iptables', '--iptables-mode', 'legacy', '--ipv6', 'off']);
    const legacy = (await ns.exec(['iptables-legacy-save', '-t', 'nat'])).stdout;
    assert.match(legacy, /^-A OUTRIGGER_OUTPUT .*--uid-owner 2102 .*-j RETURN$/m);
    assert.match(legacy, /^-A OUTPUT .*-j OUTRIGGER_OUTPUT$/m);
    const nft = (await ns.exec(['iptables-nft-save', '-t', 'nat'], { allowFail: true })).stdout;
    assert.doesNotMatch(nft, /OUTRIGGER/);
  });
});
