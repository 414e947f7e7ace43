import assert from 'node:assert/strict';
import { test } from 'node:test';
import { objectPath } from '../../../src/cli/install-manifests.ts';

test('object paths use the API plural of every kind install makes', () => {
  const path = (apiVersion: string, kind: string, namespace?: string) =>
    objectPath({ apiVersion, kind, metadata: { name: 'x', ...(namespace ? { namespace } : {}) } });
  assert.equal(path('networking.k8s.io/v1', 'IngressClass'), '/apis/networking.k8s.io/v1/ingressclasses/x');
  assert.equal(
    path('gateway.networking.k8s.io/v1', 'GatewayClass'),
    '/apis/gateway.networking.k8s.io/v1/gatewayclasses/x',
  );
  assert.equal(
    path('policy/v1', 'PodDisruptionBudget', 'ns'),
    '/apis/policy/v1/namespaces/ns/poddisruptionbudgets/x',
  );
  assert.equal(path('v1', 'ServiceAccount', 'ns'), '/api/v1/namespaces/ns/serviceaccounts/x');
  assert.equal(
    path('rbac.authorization.k8s.io/v1', 'ClusterRoleBinding'),
    '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/x',
  );
  assert.equal(
    path('admissionregistration.k8s.io/v1', 'ValidatingAdmissionPolicy'),
    '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/x',
  );
});
