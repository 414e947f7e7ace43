import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../../src/config/load.ts';
import { injectManifests } from '../../../src/injector/manifests.ts';
import { injectorSettings } from '../../../src/injector/settings.ts';
import { repoRoot } from '../../harness/tools.ts';

const settings = injectorSettings(loadConfig({ env: {} }));
const opts = { settings, namespace: 'default', namespaceLabels: {} };
interface Template {
  metadata: { annotations: Record<string, string> };
  spec: { initContainers?: { name: string }[]; containers: { name: string }[] };
}
interface Doc {
  kind: string;
  spec: { template: Template; jobTemplate: { spec: { template: Template } } };
}
const docs = (text: string): Doc[] => parseAllDocuments(text).map((d) => d.toJS() as Doc);
const template = (spec: Record<string, unknown>) => ({ metadata: { labels: { app: 'a' } }, spec });

const input = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: "1"}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: job, image: busybox}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  selector: {matchLabels: {app: db}}
  serviceName: db
  template:
    metadata: {labels: {app: db}, annotations: {outrigger.dev/inject: "false"}}
    spec: {containers: [{name: db, image: postgres}]}
`;

test('injects every pod template, passes other objects through, explains skips', () => {
  const { output, notes } = injectManifests(input, opts);
  const [cm, cron, sts] = docs(output);
  assert.deepEqual(cm, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'settings' },
    data: { a: '1' },
  });
  const pod = cron?.spec.jobTemplate.spec.template;
  assert.deepEqual(
    pod?.spec.initContainers?.map((c) => c.name),
    ['outrigger-init', 'outrigger-proxy'],
  );
  assert.ok(pod?.metadata.annotations['outrigger.dev/injected']);
  assert.equal(sts?.spec.template.spec.initContainers, undefined);
  assert.deepEqual(notes, ['statefulset/db: not injected: outrigger.dev/inject is false']);
});

test('a Namespace in the same stream lends its Pod Security level; --pod-security does otherwise', () => {
  const dep = (ns: string) => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web', namespace: ns },
    spec: { selector: {}, template: template({ containers: [{ name: 'web', image: 'nginx' }] }) },
  });
  const nsDoc = {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: 'locked', labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
  };
  const text = [nsDoc, dep('locked'), dep('open')].map((d) => JSON.stringify(d)).join('\n---\n');
  const { output, notes } = injectManifests(text, opts);
  const [, locked, open] = docs(output);
  const capture = (d: Doc | undefined) =>
    (
      JSON.parse(d?.spec.template.metadata.annotations['outrigger.dev/injected'] ?? '{}') as {
        capture: string;
      }
    ).capture;
  assert.equal(capture(locked), 'explicit');
  assert.equal(capture(open), 'transparent');
  assert.equal(notes.length, 1);
  const forced = injectManifests(JSON.stringify(dep('open')), {
    ...opts,
    namespaceLabels: { 'pod-security.kubernetes.io/enforce': 'baseline' },
  });
  assert.equal(capture(docs(forced.output)[0]), 'explicit');
});

test('an invalid annotation fails with the object, the annotation, the value and what is allowed', () => {
  const bad = `apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {outrigger.dev/capture: magic}}\nspec: {containers: [{name: a}]}\n`;
  assert.throws(
    () => injectManifests(bad, opts),
    /^OutriggerError: pod\/p: invalid annotation outrigger.dev\/capture="magic": expected one of transparent, explicit$/,
  );
});

test('a malformed pod template fails with the object and the field, not a crash', () => {
  const cases: [string, RegExp][] = [
    [
      'containers: [null]',
      /^OutriggerError: pod\/p: template\.spec\.containers\[0\] must be an object, not null$/,
    ],
    ['containers: [{name: a, ports: [{containerPort: "80"}]}]', /containerPort must be an integer/],
  ];
  for (const [spec, message] of cases)
    assert.throws(() => injectManifests(`kind: Pod\nmetadata: {name: p}\nspec: {${spec}}\n`, opts), message);
  const boolAnnotation = `kind: Pod\nmetadata: {name: p, annotations: {outrigger.dev/inject: true}}\nspec: {containers: [{name: a}]}\n`;
  assert.throws(
    () => injectManifests(boolAnnotation, opts),
    /annotations\["outrigger.dev\/inject"\] must be a string, not boolean/,
  );
});

test('injecting twice changes nothing the second time', () => {
  const once = injectManifests(input, opts).output;
  assert.equal(injectManifests(once, opts).output, once);
});

test('outrigger inject -f prints the example app injected; bad input exits 2', () => {
  const main = path.join(repoRoot, 'src/main.ts');
  const ok = spawnSync(
    process.execPath,
    [main, 'inject', '-f', path.join(repoRoot, 'manifests/examples/app.yaml')],
    {
      encoding: 'utf8',
    },
  );
  assert.equal(ok.status, 0, ok.stderr);
  const deployment = docs(ok.stdout).find((d) => d.kind === 'Deployment');
  assert.ok(deployment?.spec.template.spec.initContainers?.some((c) => c.name === 'outrigger-proxy'));
  const bad = spawnSync(process.execPath, [main, 'inject', '-f', '-'], {
    input:
      'kind: Pod\nmetadata: {name: p, annotations: {outrigger.dev/snapshot: perhaps}}\nspec: {containers: [{name: a}]}\n',
    encoding: 'utf8',
  });
  assert.equal(bad.status, 2);
  assert.match(
    bad.stderr,
    /pod\/p: invalid annotation outrigger.dev\/snapshot="perhaps": expected true or false/,
  );
});
