import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CONTROLLER, selectIngresses } from '../../../src/gateway/classes.ts';
import { slimIngressClass } from '../../../src/gateway/objects.ts';
import { ingress } from './ingress-fixtures.ts';

const cls = (name: string, controller: string, isDefault = false) =>
  slimIngressClass({
    metadata: {
      name,
      ...(isDefault ? { annotations: { 'ingressclass.kubernetes.io/is-default-class': 'true' } } : {}),
    },
    spec: { controller },
  });

const ings = [
  ingress({ name: 'ours', className: 'outrigger' }),
  ingress({ name: 'ours-renamed', className: 'edge' }),
  ingress({ name: 'nginx', className: 'nginx' }),
  ingress({ name: 'unknown-class', className: 'nope' }),
  ingress({
    name: 'annotated',
    className: null,
    annotations: { 'kubernetes.io/ingress.class': 'outrigger' },
  }),
  ingress({
    name: 'annotated-nginx',
    className: null,
    annotations: { 'kubernetes.io/ingress.class': 'nginx' },
  }),
  ingress({ name: 'classless', className: null }),
];
const names = (xs: { metadata: { name: string } }[]) => xs.map((x) => x.metadata.name).sort();
const policy = { controller: CONTROLLER, watchWithoutClass: false };

test('Ingresses whose class (field or deprecated annotation) names a class with our controller', () => {
  const classes = [
    cls('outrigger', CONTROLLER),
    cls('edge', CONTROLLER),
    cls('nginx', 'k8s.io/ingress-nginx'),
  ];
  assert.deepEqual(names(selectIngresses(ings, classes, policy)), ['annotated', 'ours', 'ours-renamed']);
});

test('class-less Ingresses only when one of our classes is the default, or with watchWithoutClass', () => {
  const asDefault = [cls('outrigger', CONTROLLER, true)];
  assert.deepEqual(names(selectIngresses(ings, asDefault, policy)), ['annotated', 'classless', 'ours']);
  const someoneElsesDefault = [cls('outrigger', CONTROLLER), cls('nginx', 'k8s.io/ingress-nginx', true)];
  assert.deepEqual(names(selectIngresses(ings, someoneElsesDefault, policy)), ['annotated', 'ours']);
  assert.deepEqual(
    names(selectIngresses(ings, someoneElsesDefault, { ...policy, watchWithoutClass: true })),
    ['annotated', 'classless', 'ours'],
  );
});

test('no IngressClass of ours known: nothing with a class is served', () => {
  assert.deepEqual(names(selectIngresses(ings, [], policy)), []);
});
