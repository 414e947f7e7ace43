import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkAnnotations, loadConfig } from '../../../src/config/load.ts';
import { parsePodInfoFile } from '../../../src/config/podinfo.ts';

test('precedence is flag > env > annotation > default', () => {
  const annotations = { 'outrigger.dev/log-level': 'warn', 'outrigger.dev/max-watches': '50' };
  const env = { OUTRIGGER_LOG_LEVEL: 'error', OUTRIGGER_MAX_WATCHES: '60' };
  const c = loadConfig({ flags: { maxWatches: '70' }, env, annotations });
  assert.equal(c.maxWatches, 70);
  assert.equal(c.logLevel, 'error');
  assert.equal(loadConfig({ annotations }).logLevel, 'warn');
  assert.equal(loadConfig({}).logLevel, 'info');
  assert.equal(loadConfig({}).egressPort, 7400);
});

test('an invalid value names the key, the value and what is allowed', () => {
  assert.throws(
    () => loadConfig({ flags: { egressPort: '70000' } }),
    /invalid flag --egress-port="70000": expected an integer from 1 to 65535/,
  );
  assert.throws(
    () => loadConfig({ env: { OUTRIGGER_CAPTURE: 'magic' } }),
    /invalid environment variable OUTRIGGER_CAPTURE="magic": expected one of transparent, explicit/,
  );
  assert.throws(
    () => checkAnnotations({ 'outrigger.dev/trace-sampling': '2' }),
    /invalid annotation outrigger.dev\/trace-sampling="2": expected a number from 0 to 1/,
  );
});

test('a misspelt annotation under our prefix is rejected, others are ignored', () => {
  assert.throws(
    () => checkAnnotations({ 'outrigger.dev/loglevel': 'debug' }),
    /unknown annotation outrigger.dev\/loglevel/,
  );
  assert.doesNotThrow(() => checkAnnotations({ 'example.com/whatever': 'x' }));
});

test('repeatable flags and list values parse', () => {
  const c = loadConfig({
    flags: { appPorts: ['8080', '9090'] },
    annotations: {
      'outrigger.dev/exclude-outbound-cidrs': '10.0.0.0/8, fd00::/8',
      'outrigger.dev/exclude-inbound-ports': '25,8000-8100',
    },
  });
  assert.deepEqual(c.appPorts, [8080, 9090]);
  assert.deepEqual(c.excludeOutboundCidrs, ['10.0.0.0/8', 'fd00::/8']);
  assert.deepEqual(c.excludeInboundPorts, ['25', '8000:8100']);
  assert.throws(
    () => loadConfig({ annotations: { 'outrigger.dev/exclude-outbound-cidrs': '10.0.0.0/33' } }),
    /expected comma-separated CIDRs/,
  );
});

test('downward-API annotation files are unquoted like kubelet writes them', () => {
  const text = 'outrigger.dev/log-level="debug"\nkubectl.kubernetes.io/last-applied="{\\"a\\":1}"\n';
  assert.deepEqual(parsePodInfoFile(text), {
    'outrigger.dev/log-level': 'debug',
    'kubectl.kubernetes.io/last-applied': '{"a":1}',
  });
});

test('the heap step reads binary sizes, 0 is off, and a size out of range names what is allowed', () => {
  assert.equal(loadConfig({}).heapStep, 0);
  assert.equal(loadConfig({ annotations: { 'outrigger.dev/heap-step': '4Mi' } }).heapStep, 4 * 1024 ** 2);
  assert.equal(loadConfig({ env: { OUTRIGGER_HEAP_STEP: '1Gi' } }).heapStep, 1024 ** 3);
  assert.equal(loadConfig({ flags: { heapStep: '0' } }).heapStep, 0);
  for (const bad of ['512Ki', '2Gi', '4MB', '-1', 'four'])
    assert.throws(
      () => checkAnnotations({ 'outrigger.dev/heap-step': bad }),
      new RegExp(
        `invalid annotation outrigger.dev/heap-step="${bad}": expected 0 \\(off\\) or a size from 1Mi to 1Gi`,
      ),
    );
});
