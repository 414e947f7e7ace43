import assert from 'node:assert/strict';
import { test } from 'node:test';
import { knownAnnotations, loadConfig } from '../../../src/config/load.ts';
import { injectPod } from '../../../src/injector/mutate.ts';
import { injectorSettings, podConfig } from '../../../src/injector/settings.ts';
import type { PodLike } from '../../../src/injector/types.ts';

const pod = (annotations: Record<string, string> = {}): PodLike => ({
  metadata: { name: 'p', annotations },
  spec: { containers: [{ name: 'app' }] },
});

test("a pod's annotation beats the injector's mesh-wide flags", () => {
  const defaults = loadConfig({ flags: { proxyCpu: '300m', capture: 'explicit' }, env: {} });
  const c = podConfig(defaults, { 'outrigger.dev/proxy-cpu': '50m' });
  assert.equal(c.proxyCpu, '50m');
  assert.equal(c.capture, 'explicit', 'unannotated keys keep the mesh-wide value');
});

test('the webhook validates with the sidecar’s own checks: every known annotation is accepted', () => {
  const defaults = loadConfig({ env: {} });
  assert.throws(
    () => podConfig(defaults, { 'outrigger.dev/max-watches': '0' }),
    /expected an integer from 1 to 100000/,
  );
  assert.throws(
    () => podConfig(defaults, { 'outrigger.dev/typo': 'x' }),
    (e: Error) => [...knownAnnotations].every((a) => e.message.includes(a)),
  );
});

test("the webhook's own namespace and the system namespaces are never injected", () => {
  const settings = injectorSettings(loadConfig({ env: {} }), 'mesh-system');
  for (const ns of ['kube-system', 'kube-public', 'kube-node-lease', 'mesh-system'])
    assert.equal(injectPod(pod(), { name: ns }, settings).kind, 'skipped', ns);
  assert.equal(injectPod(pod(), { name: 'shop' }, settings).kind, 'injected');
});

test('mirror pods and pods that already carry our containers are left alone', () => {
  const settings = injectorSettings(loadConfig({ env: {} }));
  const mirror = pod({ 'kubernetes.io/config.mirror': 'abc' });
  assert.deepEqual(injectPod(mirror, { name: 'shop' }, settings).kind, 'skipped');
  const stripped: PodLike = {
    metadata: {},
    spec: { containers: [{ name: 'app' }, { name: 'outrigger-proxy' }] },
  };
  assert.deepEqual(injectPod(stripped, { name: 'shop' }, settings), {
    kind: 'skipped',
    reason: 'already injected',
    warnings: [],
  });
});

test('an opted-out pod is not validated further: its other annotations are not ours to judge', () => {
  const settings = injectorSettings(loadConfig({ env: {} }));
  const r = injectPod(
    pod({ 'outrigger.dev/inject': 'false', 'outrigger.dev/log-level': 'loud' }),
    { name: 'shop' },
    settings,
  );
  assert.equal(r.kind, 'skipped');
});

test("the webhook's --mesh-routes default is written as the pod's annotation; the pod's own annotation wins", async () => {
  const { applyPatch } = await import('../../../src/injector/patch.ts');
  const annotationsAfter = (settings: ReturnType<typeof injectorSettings>, p: PodLike) => {
    const r = injectPod(p, { name: 'shop' }, settings);
    assert.equal(r.kind, 'injected');
    return applyPatch(p, r.kind === 'injected' ? r.patch : []).metadata?.annotations ?? {};
  };
  const on = injectorSettings(loadConfig({ flags: { meshRoutes: 'true' }, env: {} }));
  assert.equal(annotationsAfter(on, pod())['outrigger.dev/mesh-routes'], 'true');
  assert.equal(
    annotationsAfter(on, pod({ 'outrigger.dev/mesh-routes': 'false' }))['outrigger.dev/mesh-routes'],
    'false',
    "the pod's own annotation is kept",
  );
  const unannotated: PodLike = { spec: { containers: [{ name: 'app' }] } };
  assert.equal(
    annotationsAfter(on, unannotated)['outrigger.dev/mesh-routes'],
    'true',
    'a pod without metadata',
  );
  // The built-in default: nothing is written, so the sidecar's own default applies.
  const off = injectorSettings(loadConfig({ env: {} }));
  assert.equal(annotationsAfter(off, pod())['outrigger.dev/mesh-routes'], undefined);
  // Also from the webhook's environment, as for every injection default.
  const fromEnv = injectorSettings(loadConfig({ env: { OUTRIGGER_MESH_ROUTES: 'true' } }));
  assert.equal(annotationsAfter(fromEnv, pod())['outrigger.dev/mesh-routes'], 'true');
});
