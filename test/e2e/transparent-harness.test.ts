// The network-namespace harness itself: other e2e tests build their "pods" on it, so its
// isolation and cleanup promises are checked here.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { describe, test } from 'node:test';
import {
  bridgeIntoNetns,
  createNetns,
  linkNetns,
  netnsUnavailable,
  requireNetns,
  waitForPort,
  withNetns,
  type Tool,
} from '../harness/netns.ts';

const node = process.execPath;
const serve = (host: string, port: number, reply: string): string =>
  `require('net').createServer(s=>{s.on('error',()=>{});s.end(${JSON.stringify(reply)})}).listen(${port},${JSON.stringify(host)})`;
const fetchLine = (host: string, port: number): string =>
  `const s=require('net').connect(${port},${JSON.stringify(host)});let d='';s.on('data',c=>d+=c);s.on('end',()=>process.stdout.write(d));s.on('error',e=>{process.stderr.write(e.message);process.exit(2)})`;

function hostHasAddress(address: string): boolean {
  return Object.values(os.networkInterfaces()).some((l) => l?.some((i) => i.address === address));
}

describe('netns harness', () => {
  test('requireNetns fails under CI=true when a tool is missing, and skips otherwise', (t) => {
    const missing = 'no-such-tool-outrigger' as Tool;
    const saved = process.env.CI;
    try {
      process.env.CI = 'true';
      assert.throws(() => requireNetns(t, [missing]), /CI=true and/);
      process.env.CI = 'false';
      let skipped = '';
      assert.equal(requireNetns({ skip: (m?: string) => void (skipped = m ?? '') }, [missing]), false);
      assert.match(skipped, /no-such-tool-outrigger|root|Linux/);
    } finally {
      if (saved === undefined) delete process.env.CI;
      else process.env.CI = saved;
    }
  });

  test('a local range is bindable inside the namespace and absent from the host', async (t) => {
    if (!requireNetns(t)) return;
    const ns = await createNetns('anyip', { t, localRanges: ['10.244.7.0/24', 'fd00:10:244:7::/64'] });
    ns.spawn([node, '-e', serve('10.244.7.42', 8080, 'v4')]);
    ns.spawn([node, '-e', serve('fd00:10:244:7::42', 8080, 'v6')]);
    await waitForPort(ns, '10.244.7.42', 8080);
    await waitForPort(ns, 'fd00:10:244:7::42', 8080);
    assert.equal((await ns.exec([node, '-e', fetchLine('10.244.7.42', 8080)])).stdout, 'v4');
    assert.equal((await ns.exec([node, '-e', fetchLine('fd00:10:244:7::42', 8080)])).stdout, 'v6');
    assert.equal(hostHasAddress('10.244.7.42'), false);
  });

  test('linked namespaces reach each other over IPv4 and IPv6; the host sees no link', async (t) => {
    if (!requireNetns(t)) return;
    const a = await createNetns('linka', { t });
    const b = await createNetns('linkb', { t });
    await linkNetns(a, b, { a: ['10.245.0.1/24', 'fd00:245::1/64'], b: ['10.245.0.2/24', 'fd00:245::2/64'] });
    b.spawn([node, '-e', serve('::', 9000, 'hello')]);
    await waitForPort(b, '127.0.0.1', 9000);
    assert.equal((await a.exec([node, '-e', fetchLine('10.245.0.2', 9000)])).stdout, 'hello');
    assert.equal((await a.exec([node, '-e', fetchLine('fd00:245::2', 9000)])).stdout, 'hello');
    const links = Object.keys(os.networkInterfaces());
    assert.ok(!links.some((l) => l.startsWith('oa') || l.startsWith('ob')), links.join(','));
  });

  test('a process runs as the requested UID', async (t) => {
    if (!requireNetns(t, ['setpriv'])) return;
    await withNetns('uid', async (ns) => {
      const r = await ns.exec(['id', '-u'], { uid: 2102 });
      assert.equal(r.stdout.trim(), '2102');
    });
  });

  test('removal kills what runs inside and deletes the namespace, even after a failure', async (t) => {
    if (!requireNetns(t)) return;
    let name = '';
    let pid = 0;
    await assert.rejects(
      withNetns('fail', (ns) => {
        name = ns.name;
        pid = ns.spawn(['sleep', '300']).pid ?? 0;
        return Promise.reject(new Error('test body failed'));
      }),
      /test body failed/,
    );
    assert.equal(existsSync(`/var/run/netns/${name}`), false);
    await new Promise((r) => setTimeout(r, 100));
    assert.throws(() => process.kill(pid, 0), /ESRCH/);
  });

  test('a bridge brings a host loopback service into the namespace', async (t) => {
    if (!requireNetns(t)) return;
    const server = net.createServer((s) => s.end('from the host'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.after(() => server.close());
    const ns = await createNetns('bridge', { t });
    const bridge = await bridgeIntoNetns(
      ns,
      { host: '127.0.0.1', port: (server.address() as net.AddressInfo).port },
      6443,
    );
    t.after(() => bridge.close());
    assert.equal((await ns.exec([node, '-e', fetchLine('127.0.0.1', 6443)])).stdout, 'from the host');
  });

  test('reports why it cannot run, or nothing when it can', () => {
    const reason = netnsUnavailable();
    assert.ok(reason === undefined || reason.length > 0);
    if (process.env.CI === 'true') assert.equal(reason, undefined);
  });
});
