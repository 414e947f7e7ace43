import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadGatewayConfig } from '../../../src/config/gateway-options.ts';
import { unknownEnv } from '../../../src/config/load.ts';

test('gateway options: flag > env > default, shared data-path options parse as the sidecar does', () => {
  const c = loadGatewayConfig({
    flags: { httpPort: '9080' },
    env: {
      OUTRIGGER_HTTP_PORT: '7080',
      OUTRIGGER_HTTPS_PORT: '7443',
      OUTRIGGER_RETRY_STATUSES: '502,503',
    },
  });
  assert.equal(c.httpPort, 9080);
  assert.equal(c.httpsPort, 7443);
  assert.deepEqual(c.retryStatuses, [502, 503]);
  assert.equal(c.controller, 'outrigger.dev/gateway');
  assert.equal(c.watchNamespace, undefined);
  assert.deepEqual(c.publishStatusAddress, []);
});

test('an invalid value names the key, the value and what is allowed', () => {
  assert.throws(
    () => loadGatewayConfig({ flags: { defaultCertificate: 'no-slash' } }),
    /invalid flag --default-certificate="no-slash": expected namespace\/name/,
  );
  assert.throws(
    () => loadGatewayConfig({ env: { OUTRIGGER_PUBLISH_STATUS_ADDRESS: '192.0.2.1,not a name' } }),
    /OUTRIGGER_PUBLISH_STATUS_ADDRESS="192.0.2.1,not a name": expected comma-separated IP addresses or DNS names/,
  );
  assert.deepEqual(
    loadGatewayConfig({ flags: { publishStatusAddress: '192.0.2.1, LB.example.com,2001:db8::1' } })
      .publishStatusAddress,
    ['192.0.2.1', 'lb.example.com', '2001:db8::1'],
  );
});

test('--mtls is off or on for the gateway: a mesh client has no listener to be permissive or strict with', () => {
  assert.equal(loadGatewayConfig({}).mtls, 'off');
  const on = loadGatewayConfig({ env: { OUTRIGGER_MTLS: 'on' } });
  assert.equal(on.mtls, 'on');
  assert.equal(on.identityDir, '/var/run/outrigger-gateway/identity', 'inside the snapshot emptyDir');
  assert.equal(on.trustBundleFile, '/etc/outrigger/trust/ca.crt');
  assert.throws(
    () => loadGatewayConfig({ flags: { mtls: 'strict' } }),
    /invalid flag --mtls="strict": expected one of off, on/,
  );
});

test("the gateway's variables are known, so they draw no unknown-variable warning", () => {
  assert.deepEqual(
    unknownEnv({ OUTRIGGER_GATEWAY_HTTP_PORT: '1', OUTRIGGER_GATEWAY_SNAPSHOT_DIR: '/x' }),
    [],
  );
  assert.deepEqual(unknownEnv({ OUTRIGGER_GATEWAY_HTTP_PROT: '1' }), [
    { name: 'OUTRIGGER_GATEWAY_HTTP_PROT', nearest: 'OUTRIGGER_GATEWAY_HTTP_PORT' },
  ]);
});
