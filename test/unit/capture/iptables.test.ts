import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../../src/config/load.ts';
import { applyCapture, tool, type Runner } from '../../../src/proxy/capture/apply.ts';
import {
  captureSpecFromConfig,
  multiportChunks,
  renderRules,
  type CaptureSpec,
  type Family,
} from '../../../src/proxy/capture/iptables.ts';

const goldenDir = path.resolve(import.meta.dirname, '../../golden/capture');

/** Compares with test/golden/capture/<name>; UPDATE_GOLDEN=1 rewrites the file instead. */
function golden(name: string, actual: string): void {
  const file = path.join(goldenDir, name);
  if (process.env.UPDATE_GOLDEN === '1' || !existsSync(file)) {
    if (process.env.CI === 'true') assert.fail(`golden file ${name} missing under CI=true`);
    mkdirSync(goldenDir, { recursive: true });
    writeFileSync(file, actual);
  }
  assert.equal(actual, readFileSync(file, 'utf8'), `differs from golden ${name} (UPDATE_GOLDEN=1 to accept)`);
}

const fromFlags = (flags: Record<string, string>): CaptureSpec =>
  captureSpecFromConfig(loadConfig({ flags, env: {} }));

const cases: Record<string, CaptureSpec> = {
  default: fromFlags({}),
  excludes: fromFlags({
    excludeInboundPorts: '9090,15000-15010',
    excludeOutboundPorts: '5432,3306',
    excludeInboundCidrs: '10.0.0.0/8,fd00:1::/64',
    excludeOutboundCidrs: '169.254.169.254/32,10.96.0.0/12,fd00:10:96::/112',
    proxyUid: '1337',
    egressPort: '15001',
    ingressPort: '15006',
    adminPort: '15020',
  }),
  'many-ports': fromFlags({
    excludeOutboundPorts: Array.from({ length: 20 }, (_, i) => String(2000 + i)).join(',') + ',3000-3100',
  }),
};

describe('iptables rules (golden files)', () => {
  for (const [name, spec] of Object.entries(cases)) {
    for (const family of [4, 6] as Family[]) {
      test(`${name} IPv${family}`, () => golden(`${name}.v${family}.rules`, renderRules(spec, family)));
    }
  }

  test('CIDRs go only to their own family', () => {
    const v4 = renderRules(cases.excludes!, 4);
    const v6 = renderRules(cases.excludes!, 6);
    assert.match(v4, /-d 169\.254\.169\.254\/32 /);
    assert.doesNotMatch(v4, /fd00/);
    assert.match(v6, /-d fd00:10:96::\/112 /);
    assert.match(v6, /-s fd00:1::\/64 /);
    assert.doesNotMatch(v6, /10\.0\.0\.0/);
  });

  test('the proxy UID and loopback return before any redirect', () => {
    const lines = renderRules(cases.default!, 4).split('\n');
    const uid = lines.findIndex((l) => l.includes('--uid-owner 2102') && l.endsWith('-j RETURN'));
    const lo = lines.findIndex((l) => l.includes('-o lo') && l.endsWith('-j RETURN'));
    const redirect = lines.findIndex((l) => l.includes('--to-ports 7400'));
    assert.ok(uid >= 0 && lo > uid && redirect > lo);
  });

  test('the admin and mesh ports are never redirected inbound, even with no exclusions', () => {
    assert.match(
      renderRules(cases.default!, 4),
      /-A OUTRIGGER_INBOUND -p tcp -m multiport --dports 7402,7403 .*-j RETURN/,
    );
  });

  test('jumps already in the table are not appended again', () => {
    const existing = [
      '*nat',
      ':PREROUTING ACCEPT [0:0]',
      '-A PREROUTING -p tcp -m comment --comment outrigger/install-prerouting -j OUTRIGGER_INBOUND',
      '-A OUTPUT -p tcp -m comment --comment outrigger/install-output -j OUTRIGGER_OUTPUT',
      'COMMIT',
    ].join('\n');
    const out = renderRules(cases.default!, 4, { existing });
    assert.doesNotMatch(out, /^-A PREROUTING/m);
    assert.doesNotMatch(out, /^-A OUTPUT/m);
    const half = renderRules(cases.default!, 4, { existing: existing.split('\n').slice(0, 3).join('\n') });
    assert.doesNotMatch(half, /^-A PREROUTING/m);
    assert.match(half, /^-A OUTPUT .*-j OUTRIGGER_OUTPUT$/m);
  });
});

describe('multiportChunks', () => {
  test('splits at 15 ports, counting a range as two', () => {
    const ports = Array.from({ length: 16 }, (_, i) => String(i + 1));
    assert.deepEqual(multiportChunks(ports), [ports.slice(0, 15).join(','), '16']);
    const ranged = ['1:2', ...Array.from({ length: 13 }, (_, i) => String(i + 10)), '30:40'];
    assert.deepEqual(multiportChunks(ranged), [ranged.slice(0, 14).join(','), '30:40']);
    assert.deepEqual(multiportChunks([]), []);
  });
});

describe('applyCapture', () => {
  function fakeRunner(saved: string, fail?: string): Runner & { calls: string[][]; inputs: string[] } {
    const calls: string[][] = [];
    const inputs: string[] = [];
    const run: Runner = (cmd, args, input) => {
      calls.push([cmd, ...args]);
      if (input !== undefined) inputs.push(input);
      if (cmd === fail) return { code: 2, stdout: '', stderr: 'iptables-restore: line 3 failed' };
      return { code: 0, stdout: cmd.endsWith('-save') ? saved : '', stderr: '' };
    };
    return Object.assign(run, { calls, inputs });
  }

  test('reads each table, then restores with --noflush, IPv4 then IPv6', () => {
    const run = fakeRunner('*nat\nCOMMIT\n');
    applyCapture(cases.default!, { families: [4, 6], run });
    assert.deepEqual(run.calls, [
      ['iptables-save', '-t', 'nat'],
      ['iptables-restore', '--noflush'],
      ['ip6tables-save', '-t', 'nat'],
      ['ip6tables-restore', '--noflush'],
    ]);
    assert.equal(run.inputs[0], renderRules(cases.default!, 4));
    assert.equal(run.inputs[1], renderRules(cases.default!, 6));
  });

  test('--iptables-mode names the backend binaries', () => {
    const run = fakeRunner('');
    applyCapture(cases.default!, { families: [4, 6], mode: 'legacy', run });
    assert.deepEqual(
      run.calls.map((c) => c[0]),
      [
        'iptables-legacy-save',
        'iptables-legacy-restore',
        'ip6tables-legacy-save',
        'ip6tables-legacy-restore',
      ],
    );
    assert.equal(tool(4, 'nft'), 'iptables-nft');
    assert.equal(tool(6, 'plain'), 'ip6tables');
  });

  test('a failing restore throws with the tool and its message', () => {
    const run = fakeRunner('', 'ip6tables-restore');
    assert.throws(
      () => applyCapture(cases.default!, { families: [4, 6], run }),
      /ip6tables-restore --noflush failed \(2\): iptables-restore: line 3 failed/,
    );
  });
});
