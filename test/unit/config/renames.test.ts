// Every renamed flag and variable still works for one release: it gives the value its new spelling
// gives and writes one warning on stderr naming the old and the new spelling (docs/cli.md).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gatewayOptions } from '../../../src/config/gateway-options.ts';
import { identityOptions } from '../../../src/config/identity-options.ts';
import { knownEnv } from '../../../src/config/load.ts';
import { options } from '../../../src/config/options.ts';
import {
  flagName,
  loadTable,
  resolveValue,
  setDeprecationSink,
  type TableSpec,
} from '../../../src/config/resolve.ts';
import { webhookOptions } from '../../../src/config/webhook-options.ts';

const tables = {
  proxy: options,
  gateway: gatewayOptions,
  identity: identityOptions,
  webhook: webhookOptions,
};

function collecting(): string[] {
  const lines: string[] = [];
  setDeprecationSink((l) => lines.push(l));
  return lines;
}

/** A value of the option as a user types it: its default, else one its parser takes. */
const SAMPLES: Record<string, string> = {
  '--default-certificate': 'ns/name',
  '--publish-status-address': '192.0.2.1',
};
function sample(spec: TableSpec<unknown>): string {
  const d = spec.default;
  if (SAMPLES[flagName(spec)]) return SAMPLES[flagName(spec)]!;
  if (spec.parser.show) return spec.parser.show(d);
  if (Array.isArray(d)) return d.join(',');
  return typeof d === 'string' || typeof d === 'number' || typeof d === 'boolean' ? String(d) : 'x';
}

for (const [command, table] of Object.entries(tables))
  for (const [name, spec] of Object.entries(table as Record<string, TableSpec<unknown>>)) {
    const was = spec.was;
    if (was?.env && was.parser === undefined)
      test(`${command}: ${was.env} still sets ${spec.env}, with one warning`, () => {
        const lines = collecting();
        const raw = sample(spec);
        const want = resolveValue(spec, { env: { [spec.env]: raw } });
        assert.deepEqual(resolveValue(spec, { env: { [was.env!]: raw } }), want, name);
        resolveValue(spec, { env: { [was.env!]: raw } });
        assert.deepEqual(lines, [
          `outrigger: warning: ${was.env} is deprecated and goes in the next release; use ${spec.env}\n`,
        ]);
        assert.ok(
          !was.env!.startsWith('OUTRIGGER_') || knownEnv.has(was.env!),
          'no unknown-variable warning',
        );
      });
    if (was?.flag && was.parser === undefined)
      test(`${command}: ${flagName(was as { flag: string })} is still read for ${flagName(spec)}`, () => {
        const lines = collecting();
        const raw = was.parser ? undefined : sample(spec);
        if (raw !== undefined)
          assert.deepEqual(resolveValue(spec, { oldFlag: raw }), resolveValue(spec, { flag: raw }));
        assert.match(
          lines.join(''),
          new RegExp(`${flagName(was as { flag: string })} is deprecated.*use ${flagName(spec)}\\n`),
        );
      });
  }

test('identity and webhook: --listen HOST:PORT is --listen-host and --https-port, one warning for both', () => {
  for (const [table, old] of [
    [identityOptions, 'OUTRIGGER_IDENTITY_LISTEN'],
    [webhookOptions, 'OUTRIGGER_WEBHOOK_LISTEN'],
  ] as [Record<string, TableSpec<unknown>>, string][]) {
    const lines = collecting();
    const c = loadTable<string, Record<string, unknown>>(table, {
      oldFlags: { listenHost: '127.0.0.1:9443', httpsPort: '127.0.0.1:9443' },
    });
    assert.equal(c.listenHost, '127.0.0.1');
    assert.equal(c.httpsPort, 9443);
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /--listen is deprecated.*use --listen-host and --https-port\n/);
    const fromEnv = loadTable<string, Record<string, unknown>>(table, { env: { [old]: '[::1]:0' } });
    assert.equal(fromEnv.listenHost, '::1');
    assert.equal(fromEnv.httpsPort, 0);
    const everyAddress = loadTable<string, Record<string, unknown>>(table, { env: { [old]: ':8443' } });
    assert.equal(everyAddress.listenHost, '::');
    assert.throws(
      () => loadTable(table, { oldFlags: { httpsPort: 'nowhere' } }),
      /invalid flag --listen="nowhere": expected HOST:PORT/,
    );
  }
});

test('identity: --admin-listen HOST:PORT is --admin-port, and off is still off', () => {
  collecting();
  const spec = identityOptions.adminPort;
  assert.equal(resolveValue(spec, { oldFlag: ':7412' }), 7412);
  assert.equal(resolveValue(spec, { oldFlag: 'off' }), undefined);
  assert.equal(resolveValue(spec, { flag: 'off' }), undefined);
  assert.equal(resolveValue(spec, { env: { OUTRIGGER_IDENTITY_ADMIN_LISTEN: '0.0.0.0:7402' } }), 7402);
});

test('identity and webhook: --shutdown-delay-seconds N is --shutdown-delay Ns', () => {
  for (const [table, old] of [
    [identityOptions, 'OUTRIGGER_IDENTITY_SHUTDOWN_DELAY_SECONDS'],
    [webhookOptions, 'OUTRIGGER_WEBHOOK_SHUTDOWN_DELAY_SECONDS'],
  ] as const) {
    const lines = collecting();
    assert.equal(resolveValue(table.shutdownDelay, { oldFlag: '7' }), 7_000);
    assert.equal(resolveValue(table.shutdownDelay, { env: { [old]: '0' } }), 0);
    assert.equal(resolveValue(table.shutdownDelay, { flag: '7s' }), 7_000);
    assert.equal(lines.length, 2);
    assert.throws(
      () => resolveValue(table.shutdownDelay, { oldFlag: '301' }),
      /--shutdown-delay-seconds="301": expected an integer from 0 to 300/,
    );
  }
});

test('webhook: --webhook-namespace and POD_NAMESPACE are --pod-namespace and OUTRIGGER_POD_NAMESPACE', () => {
  const lines = collecting();
  assert.equal(resolveValue(webhookOptions.podNamespace, { env: { POD_NAMESPACE: 'mesh' } }), 'mesh');
  assert.equal(resolveValue(webhookOptions.podNamespace, { oldFlag: 'mesh' }), 'mesh');
  assert.equal(
    resolveValue(webhookOptions.podNamespace, {
      env: { POD_NAMESPACE: 'old', OUTRIGGER_POD_NAMESPACE: 'new' },
    }),
    'new',
  );
  assert.deepEqual(lines, [
    'outrigger: warning: POD_NAMESPACE is deprecated and goes in the next release; use OUTRIGGER_POD_NAMESPACE\n',
    'outrigger: warning: --webhook-namespace is deprecated and goes in the next release; use --pod-namespace\n',
  ]);
});

test("every variable is OUTRIGGER_<FLAG> in every table (a repeatable flag's is plural)", () => {
  for (const [command, table] of Object.entries(tables))
    for (const spec of Object.values(
      table as Record<string, TableSpec<unknown> & { repeatable?: boolean }>,
    )) {
      const want = `OUTRIGGER_${flagName(spec).slice(2).toUpperCase().replaceAll('-', '_')}${spec.repeatable ? 'S' : ''}`;
      assert.equal(spec.env, want, `${command} ${flagName(spec)}`);
    }
});

test('proxy and gateway: --<kind>-timeout-ms N and --drain-seconds N are --<kind>-timeout Nms and --drain-duration Ns', () => {
  const lines = collecting();
  for (const table of [options, gatewayOptions]) {
    assert.equal(resolveValue(table.connectTimeoutMs, { oldFlag: '1500' }), 1_500);
    assert.equal(resolveValue(table.connectTimeoutMs, { flag: '1500ms' }), 1_500);
    assert.equal(
      resolveValue(table.requestTimeoutMs, { env: { OUTRIGGER_REQUEST_TIMEOUT_MS: '2000' } }),
      2_000,
    );
    assert.equal(resolveValue(table.idleTimeoutMs, { flag: '2m' }), 120_000);
    assert.equal(resolveValue(table.drainSeconds, { env: { OUTRIGGER_DRAIN_SECONDS: '7' } }), 7);
    assert.equal(resolveValue(table.drainSeconds, { flag: '500ms' }), 0.5);
    assert.throws(
      () => resolveValue(table.connectTimeoutMs, { flag: '1500' }),
      /invalid flag --connect-timeout="1500": expected a duration such as 500ms, 30s/,
    );
  }
  assert.deepEqual(
    lines.map((l) => l.split(' is deprecated')[0]),
    [
      'outrigger: warning: --connect-timeout-ms',
      'outrigger: warning: OUTRIGGER_REQUEST_TIMEOUT_MS',
      'outrigger: warning: OUTRIGGER_DRAIN_SECONDS',
    ],
  );
});

test("a pod annotation is outrigger.dev/ and its flag's name (--snapshot-enabled: --snapshot is the file)", () => {
  for (const spec of Object.values(options as Record<string, TableSpec<unknown>>)) {
    if (spec.annotation === undefined) continue;
    const name = flagName(spec) === '--snapshot-enabled' ? 'snapshot' : flagName(spec).slice(2);
    assert.equal(spec.annotation, `outrigger.dev/${name}`, flagName(spec));
  }
});
