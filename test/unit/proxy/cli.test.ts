import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { runDemo } from '../../../src/cli/demo.ts';
import { formatStatus } from '../../../src/cli/status.ts';
import { options } from '../../../src/config/options.ts';

const main = new URL('../../../src/main.ts', import.meta.url).pathname;
const run = (...args: string[]) =>
  spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout: 30_000 });

test('outrigger proxy --help lists every proxy option with its env variable', () => {
  const r = run('proxy', '--help');
  assert.equal(r.status, 0);
  for (const spec of Object.values(options)) {
    if (spec.scope !== 'proxy') continue;
    assert.ok(r.stdout.includes(spec.flag.split(' ')[0] ?? ''), spec.flag);
    assert.ok(r.stdout.replace(/\s+/g, ' ').includes(spec.env), spec.env);
  }
});

test('an invalid flag exits 2 naming the key, the value and what is allowed', () => {
  const r = run('proxy', '--balancer', 'fastest');
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--balancer="fastest": expected one of p2c-ewma, round-robin/);
  const env = spawnSync(process.execPath, [main, 'proxy'], {
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, OUTRIGGER_EGRESS_PORT: '70000' },
  });
  assert.equal(env.status, 2);
  assert.match(env.stderr, /OUTRIGGER_EGRESS_PORT="70000": expected an integer from 1 to 65535/);
});

test('outrigger demo runs the whole data path and every route behaves as expected', async () => {
  const lines: string[] = [];
  const ok = await runDemo({ requests: 10, out: (s) => lines.push(s) });
  const text = lines.join('\n');
  assert.equal(ok, true, text);
  assert.match(text, /greeter\.demo.*200 x10/);
  assert.match(text, /orders\.demo.*503 x3.*no_endpoints x3/);
  assert.match(text, /every route behaved as expected/);
});

test('status prints each Service with its freshness', () => {
  const text = formatStatus(
    true,
    {
      ready: true,
      subscriptions: 2,
      watches: 1,
      staleServices: 1,
      services: [
        { key: 'prod/web', endpoints: 3, source: 'api', freshness: { state: 'fresh', syncedAt: 1_000 } },
        {
          key: 'prod/db',
          endpoints: 1,
          source: 'snapshot',
          freshness: { state: 'stale', since: 0, reason: 'watch failed' },
        },
      ],
    },
    11_000,
  );
  assert.match(text, /ready: yes {3}subscriptions: 2 {3}watches: 1 {3}stale services: 1/);
  assert.match(text, /prod\/db\s+1\s+snapshot\s+stale\s+11s ago\s+watch failed/);
  assert.match(text, /prod\/web\s+3\s+api\s+fresh\s+10s ago/);
});
