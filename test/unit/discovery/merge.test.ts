import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseObjects } from '../../../src/discovery/manifest.ts';
import { mergeService, serviceInfoJson } from '../../../src/discovery/merge.ts';
import type { ServiceInfo } from '../../../src/discovery/types.ts';

const dir = join(import.meta.dirname, '../../golden/discovery');

function mergeAll(file: string): ServiceInfo[] {
  const { services, slices } = parseObjects(readFileSync(join(dir, file), 'utf8'));
  return services
    .map((s) => mergeService(s, slices))
    .sort((a, b) => `${a.key.namespace}/${a.key.name}`.localeCompare(`${b.key.namespace}/${b.key.name}`));
}

for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
  test(`merge golden: ${file}`, () => {
    const got = JSON.stringify(mergeAll(file).map(serviceInfoJson), null, 2) + '\n';
    const goldenPath = join(dir, file.replace(/\.yaml$/, '.json'));
    if (process.env.UPDATE_GOLDEN === '1') writeFileSync(goldenPath, got);
    assert.equal(got, readFileSync(goldenPath, 'utf8'));
  });
}

const byName = (file: string, name: string): ServiceInfo => {
  const s = mergeAll(file).find((x) => x.key.name === name);
  assert.ok(s, name);
  return s;
};
const addrs = (s: ServiceInfo, port: string): string[] =>
  (s.endpoints.get(port) ?? []).map((e) => `${e.address}:${e.port}`);

// The goldens pin everything; these spell out the rules so a blessed golden cannot hide a regression.
test('port numbers come from each slice, never from targetPort', () => {
  assert.deepEqual(addrs(byName('named-targetport.yaml', 'web'), 'http'), [
    '10.244.1.5:8080',
    '10.244.2.9:8080',
    '10.244.3.2:8081',
  ]);
});

test('terminating endpoints are used only when none is ready, and only if serving', () => {
  assert.deepEqual(addrs(byName('terminating-fallback.yaml', 'api'), 'grpc'), [
    '10.1.0.1:9000',
    '10.1.0.3:9000',
  ]);
  assert.deepEqual(addrs(byName('terminating-fallback.yaml', 'batch'), 'http'), [
    '10.1.1.1:8080',
    '10.1.1.3:8080',
  ]);
  assert.deepEqual(addrs(byName('terminating-fallback.yaml', 'down'), 'http'), []);
});

test('duplicates across slices collapse; unlabeled and foreign slices are ignored', () => {
  assert.deepEqual(addrs(byName('duplicates.yaml', 'cart'), ''), ['10.2.0.1:8080']);
});

test('IPv4 and IPv6 slices merge, FQDN slices are ignored, protocol separates same-numbered ports', () => {
  const dns = byName('dual-stack-fqdn.yaml', 'dns');
  assert.deepEqual(addrs(dns, 'dns'), ['10.3.0.4:5353', '10.3.0.6:5353', 'fd00:244::4:5353']);
  assert.equal(dns.endpoints.get('dns-tcp')?.length, 3);
  assert.deepEqual(dns.clusterIPs, ['10.96.0.10', 'fd00:10:96::a']);
});

test('ExternalName, headless and ClientIP affinity are data', () => {
  const ext = byName('special-services.yaml', 'billing');
  assert.equal(ext.type, 'ExternalName');
  assert.equal(ext.externalName, 'billing.example.com');
  assert.deepEqual(ext.clusterIPs, []);
  const db = byName('special-services.yaml', 'db');
  assert.equal(db.headless, true);
  assert.deepEqual(db.clusterIPs, []);
  assert.deepEqual(
    db.endpoints.get('pg')?.map((e) => e.hostname),
    ['db-0', 'db-1'],
  );
  const session = byName('special-services.yaml', 'session');
  assert.equal(session.sessionAffinity, 'ClientIP');
  assert.equal(session.affinityTimeoutSeconds, 600);
  assert.equal(session.internalTrafficPolicy, 'Local');
  assert.equal(byName('special-services.yaml', 'sticky').affinityTimeoutSeconds, 10_800);
});

test("a port's appProtocol comes from the Service, else from its EndpointSlices", () => {
  const { services, slices } = parseObjects(`
apiVersion: v1
kind: Service
metadata: { name: rpc, namespace: prod }
spec:
  clusterIP: 10.96.0.50
  ports:
    - { name: grpc, port: 9000, appProtocol: kubernetes.io/h2c }
    - { name: admin, port: 9001 }
    - { name: plain, port: 9002 }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: rpc-1, namespace: prod, labels: { kubernetes.io/service-name: rpc } }
addressType: IPv4
ports:
  - { name: grpc, port: 9000, protocol: TCP, appProtocol: grpc }
  - { name: admin, port: 9001, protocol: TCP, appProtocol: grpc }
  - { name: plain, port: 9002, protocol: TCP }
endpoints:
  - addresses: [10.1.0.5]
`);
  const [rpc] = services.map((s) => mergeService(s, slices));
  assert.deepEqual(
    rpc?.ports.map((p) => [p.name, p.appProtocol]),
    [
      ['grpc', 'kubernetes.io/h2c'],
      ['admin', 'grpc'],
      ['plain', undefined],
    ],
  );
  assert.ok(!('appProtocol' in (rpc?.ports[2] ?? {})));
});
