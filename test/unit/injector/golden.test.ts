// Golden files: AdmissionReview in (test/golden/injector/NAME.in.json) -> response out
// (NAME.out.json, the patch decoded). UPDATE_GOLDEN=1 rewrites the outputs; review the diff.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../../src/config/load.ts';
import { review } from '../../../src/injector/admission.ts';
import { injectPod } from '../../../src/injector/mutate.ts';
import { applyPatch } from '../../../src/injector/patch.ts';
import { levelForPath } from '../../../src/injector/server.ts';
import { injectorSettings } from '../../../src/injector/settings.ts';
import type { Container, PatchOp, PodLike } from '../../../src/injector/types.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';
import { restrictedViolations } from './pss.ts';

const dir = path.resolve(import.meta.dirname, '../../golden/injector');
const settings = injectorSettings(loadConfig({ env: {} }), 'outrigger-system', '0.1.0');
const update = process.env.UPDATE_GOLDEN === '1';

interface Case {
  path: string;
  review: { request: { namespace: string; object: PodLike } };
}

const cases = readdirSync(dir).filter((f) => f.endsWith('.in.json'));

test('golden cases exist', () => assert.ok(cases.length >= 20, `only ${cases.length} cases`));

for (const file of cases) {
  const name = file.replace(/\.in\.json$/, '');
  test(`golden: ${name}`, () => {
    const input = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as Case;
    const level = levelForPath(input.path);
    assert.ok(level, `bad path ${input.path}`);
    const { response } = review(input.review, level, settings, memoryLogger());
    const patch = response.patch
      ? (JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8')) as PatchOp[])
      : undefined;
    const actual = { ...response, ...(patch ? { patch } : {}) };
    // The list of allowed annotations grows with the options table; it is checked in settings tests.
    if (actual.status)
      actual.status.message = actual.status.message.replace(/(allowed annotations are ).*/, '$1...');
    const goldenPath = path.join(dir, `${name}.out.json`);
    if (update) writeFileSync(goldenPath, JSON.stringify(actual, null, 2) + '\n');
    assert.ok(existsSync(goldenPath), `missing ${goldenPath}; run with UPDATE_GOLDEN=1`);
    assert.deepEqual(actual, JSON.parse(readFileSync(goldenPath, 'utf8')));
    if (name.startsWith('reject-')) {
      assert.equal(response.allowed, false);
      assert.match(response.status?.message ?? '', /annotation outrigger\.dev\/[a-z-]+/);
    }
    if (name.startsWith('skip-')) assert.equal(response.patch, undefined);
    if (patch) checkInjected(input, patch, level);
  });
}

/** What must hold for every injected pod, whatever the annotations. */
function checkInjected(input: Case, patch: PatchOp[], level: string): void {
  const before = input.review.request.object;
  const after = applyPatch(before, patch);
  assert.ok(
    patch.every((op) => op.op === 'add'),
    'only add operations',
  );
  const ns = { name: input.review.request.namespace };
  const again = injectPod(after, ns, settings);
  assert.deepEqual(again, { kind: 'skipped', reason: 'already injected', warnings: [] }, 'idempotent');

  const ours = (c: Container): boolean => c.name.startsWith('outrigger-');
  const all = [...(after.spec.initContainers ?? []), ...after.spec.containers];
  const sidecar = all.find((c) => c.name === 'outrigger-proxy');
  assert.ok(sidecar, 'sidecar present');
  assert.deepEqual(restrictedViolations(sidecar), [], 'sidecar meets the restricted standard');
  if (level !== 'privileged') {
    assert.ok(!all.some((c) => c.name === 'outrigger-init'), 'no NET_ADMIN init container under PSA');
    for (const c of all.filter(ours)) assert.deepEqual(restrictedViolations(c), [], c.name);
  }
  const status = JSON.parse(after.metadata?.annotations?.['outrigger.dev/injected'] ?? '{}') as {
    capture?: string;
    sidecar?: string;
  };
  if (status.capture === 'explicit') {
    const proxied = status.sidecar === 'native' ? all : after.spec.containers;
    for (const c of proxied.filter((c) => !ours(c)))
      assert.ok(
        c.env?.some((e) => e.name === 'HTTP_PROXY'),
        `${c.name} has HTTP_PROXY in explicit mode`,
      );
  }
  // What the injector hands the sidecar and the iptables step parses with the same option table.
  for (const c of all.filter(ours)) {
    const env = Object.fromEntries(
      (c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]),
    );
    const config = loadConfig({ env, annotations: after.metadata?.annotations ?? {} });
    if (c.name === 'outrigger-proxy') assert.equal(config.capture, status.capture);
    if (c.name === 'outrigger-init') {
      const wanted = loadConfig({ annotations: before.metadata?.annotations ?? {} });
      assert.deepEqual(config.excludeOutboundCidrs, wanted.excludeOutboundCidrs);
      assert.deepEqual(config.excludeInboundPorts, wanted.excludeInboundPorts);
    }
  }
  for (const c of all.filter(ours))
    for (const m of (c.volumeMounts ?? []) as { subPath?: string }[])
      assert.equal(m.subPath, undefined, 'no subPath: it would never see token rotation');
  // The user's containers keep their order, and nothing of theirs is dropped.
  assert.deepEqual(
    after.spec.containers.filter((c) => !ours(c)).map((c) => c.name),
    before.spec.containers.map((c) => c.name),
  );
  assert.deepEqual(
    (after.spec.initContainers ?? []).filter((c) => !ours(c)).map((c) => c.name),
    (before.spec.initContainers ?? []).map((c) => c.name),
  );
  type Projected = {
    name: string;
    projected?: { sources: { serviceAccountToken?: { expirationSeconds: number } }[] };
  };
  const token = (after.spec.volumes as Projected[])
    .find((v) => v.name === 'outrigger-token')
    ?.projected?.sources.find((s) => s.serviceAccountToken)?.serviceAccountToken;
  assert.ok(token, 'the sidecar has its own projected token');
  assert.ok(
    token.expirationSeconds >= 600 && token.expirationSeconds !== 3607,
    'explicit, non-extended expiry',
  );
}
