import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gatewayChecks } from '../../../src/cli/check-gateway.ts';
import type { KubeApi } from '../../../src/cli/kube-api.ts';

const DEPLOYMENT = '/apis/apps/v1/namespaces/outrigger-gateway/deployments/outrigger-gateway';
const deployment = (args: string[]) => ({
  status: 200,
  body: {
    spec: { replicas: 2, template: { spec: { containers: [{ args }] } } },
    status: { readyReplicas: 2 },
  },
});

function apiWith(answers: Record<string, { status: number; body?: unknown }>): KubeApi {
  return {
    server: 'https://api.test',
    kubeconfig: '/dev/null',
    call: (_m, path) => Promise.resolve({ body: {}, ...(answers[path] ?? { status: 404 }) }),
  };
}

const lines = async (answers: Record<string, { status: number; body?: unknown }>) =>
  (await gatewayChecks(apiWith(answers))).map((r) => `${r.outcome} ${r.check}: ${r.message}`);

test('with --gateway-api, check names missing CRDs, then a missing GatewayClass, and passes when both are there', async () => {
  const base = {
    [DEPLOYMENT]: deployment(['--gateway-api=true']),
    '/apis/networking.k8s.io/v1/ingressclasses/outrigger': {
      status: 200,
      body: { spec: { controller: 'outrigger.dev/gateway' } },
    },
  };
  const noCrds = await lines(base);
  assert.match(noCrds.at(-1)!, /^fail gateway API: .*serves no gateway\.networking\.k8s\.io\/v1/);
  const noClass = await lines({ ...base, '/apis/gateway.networking.k8s.io/v1': { status: 200 } });
  assert.match(noClass.at(-1)!, /^fail gateway API: GatewayClass outrigger is missing/);
  const ok = await lines({
    ...base,
    '/apis/gateway.networking.k8s.io/v1/gatewayclasses/outrigger': {
      status: 200,
      body: { spec: { controllerName: 'outrigger.dev/gateway' } },
    },
  });
  assert.match(
    ok.at(-1)!,
    /^pass gateway API: GatewayClass outrigger \(controllerName outrigger\.dev\/gateway\)/,
  );
  const ingressOnly = await lines({ ...base, [DEPLOYMENT]: deployment([]) });
  assert.ok(
    !ingressOnly.some((l) => l.includes('gateway API')),
    'nothing about Gateway API without the flag',
  );
});

test('a class of our name that another controller serves fails, naming the controller it has', async () => {
  const out = await lines({
    [DEPLOYMENT]: deployment(['--gateway-api=true']),
    '/apis/networking.k8s.io/v1/ingressclasses/outrigger': {
      status: 200,
      body: { spec: { controller: 'k8s.io/ingress-nginx' } },
    },
    '/apis/gateway.networking.k8s.io/v1/gatewayclasses/outrigger': {
      status: 200,
      body: { spec: { controllerName: 'outrigger.dev/gateway' } },
    },
  });
  assert.ok(
    out.includes(
      'fail gateway class: IngressClass outrigger names controller "k8s.io/ingress-nginx", not outrigger.dev/gateway: the gateway serves nothing of it',
    ),
    out.join('\n'),
  );
  assert.match(out.at(-1)!, /^pass gateway API/);
});
