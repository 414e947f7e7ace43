import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../../src/config/load.ts';
import { quantityBytes, sidecarContainer } from '../../../src/injector/containers.ts';
import { podConfig } from '../../../src/injector/settings.ts';

const resourcesOf = (annotations: Record<string, string>, flags: Record<string, unknown> = {}) => {
  const config = podConfig(loadConfig({ flags, env: {} }), annotations);
  return sidecarContainer({ config, capture: 'explicit', native: true, appPorts: [] }).resources as {
    requests: { memory: string };
    limits: { memory: string };
  };
};

test('the sidecar gets a memory request below its limit by default', () => {
  const r = resourcesOf({});
  assert.ok(
    quantityBytes(r.requests.memory) < quantityBytes(r.limits.memory),
    `${r.requests.memory} < ${r.limits.memory}`,
  );
});

test('request and limit are set apart, by annotation or mesh-wide flag', () => {
  const r = resourcesOf({ 'outrigger.dev/proxy-memory': '80Mi', 'outrigger.dev/proxy-memory-limit': '1Gi' });
  assert.deepEqual([r.requests.memory, r.limits.memory], ['80Mi', '1Gi']);
  const f = resourcesOf({}, { proxyMemory: '100Mi', proxyMemoryLimit: '300Mi' });
  assert.deepEqual([f.requests.memory, f.limits.memory], ['100Mi', '300Mi']);
});

test('a request raised above the limit takes the limit with it (the API server refuses limit < request)', () => {
  const r = resourcesOf({ 'outrigger.dev/proxy-memory': '2Gi' });
  assert.deepEqual([r.requests.memory, r.limits.memory], ['2Gi', '2Gi']);
  const mixed = resourcesOf({
    'outrigger.dev/proxy-memory': '1G',
    'outrigger.dev/proxy-memory-limit': '900Mi',
  });
  assert.equal(mixed.limits.memory, '1G', '1G is 10^9 bytes, more than 900Mi');
});

test('quantities in every suffix the option accepts', () => {
  assert.equal(quantityBytes('64Mi'), 64 * 2 ** 20);
  assert.equal(quantityBytes('1G'), 1e9);
  assert.equal(quantityBytes('1e9'), 1e9);
  assert.equal(quantityBytes('134217728'), 134217728);
  assert.equal(quantityBytes('0.5Gi'), 2 ** 29);
  assert.equal(quantityBytes('1500m'), 1.5);
});
