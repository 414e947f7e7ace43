import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../../src/config/load.ts';
import { injectPod } from '../../../src/injector/mutate.ts';
import { injectorSettings } from '../../../src/injector/settings.ts';
import { captureSpecFromConfig, renderRules } from '../../../src/proxy/capture/iptables.ts';

const BAD: [string, RegExp][] = [
  ['fe80::1%eth0/64', /zone/],
  ['fe80::%25eth0/64', /zone/],
  ['10.0.0.0/33', /prefix length/],
  ['fd00::/129', /prefix length/],
  ['10.0.0.0/-1', /prefix length/],
  ['10.0.0.0/08', /prefix length/],
  ['10.0.0.0/ 8', /prefix length/],
  ['10.0.0.0', /prefix length/],
  ['10.0.0.0/8/8', /one "\/"/],
  ['010.0.0.0/8', /address/],
  ['10.0.0/8', /address/],
  ['10.1.2.3/8', /host bits.*10\.0\.0\.0\/8/],
  ['fd00::1/8', /host bits.*fd00::\/8/],
  ['::ffff:10.0.0.0/104', /IPv4-mapped.*IPv4 form/],
  ['example.com/32', /address/],
];

test('CIDR options: config loading rejects zones, bad prefix lengths, host bits, naming the value', () => {
  for (const [cidr, why] of BAD) {
    for (const key of ['exclude-inbound-cidrs', 'exclude-outbound-cidrs']) {
      const annotations = { [`outrigger.dev/${key}`]: `10.0.0.0/8,${cidr}` };
      assert.throws(
        () => loadConfig({ annotations }),
        (e: Error) => {
          assert.match(e.message, new RegExp(`invalid annotation outrigger.dev/${key}=`));
          assert.match(e.message, /expected comma-separated CIDRs/);
          assert.ok(e.message.includes(JSON.stringify(cidr.trim())), `${e.message} names ${cidr}`);
          assert.match(e.message, why);
          return true;
        },
        `${key}=${cidr}`,
      );
    }
    assert.throws(() => loadConfig({ flags: { excludeOutboundCidrs: cidr } }), why, `flag ${cidr}`);
    assert.throws(() => loadConfig({ env: { OUTRIGGER_EXCLUDE_INBOUND_CIDRS: cidr } }), why, `env ${cidr}`);
  }
});

test('CIDR options: valid forms pass, IPv6 is written in its canonical form', () => {
  const c = loadConfig({
    annotations: {
      'outrigger.dev/exclude-outbound-cidrs': '0.0.0.0/0, 10.0.0.0/8,169.254.169.254/32,FD00:0:0:0::/64,::/0',
      'outrigger.dev/exclude-inbound-cidrs': '2001:db8::1/128,64:ff9b::/96,::1/128',
    },
  });
  assert.deepEqual(c.excludeOutboundCidrs, [
    '0.0.0.0/0',
    '10.0.0.0/8',
    '169.254.169.254/32',
    'fd00::/64',
    '::/0',
  ]);
  assert.deepEqual(c.excludeInboundCidrs, ['2001:db8::1/128', '64:ff9b::/96', '::1/128']);
});

test('CIDR options: the webhook rejects the pod instead of admitting a zone', () => {
  const settings = injectorSettings(loadConfig({}));
  const pod = {
    metadata: { name: 'p', annotations: { 'outrigger.dev/exclude-inbound-cidrs': 'fe80::1%eth0/64' } },
    spec: { containers: [{ name: 'app', image: 'app' }] },
  };
  assert.throws(() => injectPod(pod, { name: 'shop' }, settings), /invalid annotation .*zone/);
});

test('CIDR options: the iptables step refuses a CIDR that bypassed config loading', () => {
  const spec = { ...captureSpecFromConfig(loadConfig({})), excludeInboundCidrs: ['fe80::1%eth0/64'] };
  assert.throws(() => renderRules(spec, 6), /exclude-inbound-cidrs.*fe80::1%eth0\/64.*zone/);
  const v4 = { ...captureSpecFromConfig(loadConfig({})), excludeOutboundCidrs: ['10.1.2.3/8'] };
  assert.throws(() => renderRules(v4, 4), /exclude-outbound-cidrs.*host bits/);
});
