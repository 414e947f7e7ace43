import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatFleet, readFleet } from '../../../src/cli/fleet.ts';
import type { KubeApi } from '../../../src/cli/kube-api.ts';

const pod = (name: string, image: string, phase = 'Running') => ({
  metadata: { name, namespace: 'shop', annotations: { 'outrigger.dev/injected': '{}' } },
  spec: {
    initContainers: [
      { name: 'outrigger-proxy', image, ports: [{ name: 'outrigger-admin', containerPort: 7402 }] },
    ],
  },
  status: { phase },
});
const buildInfo = (v: string) => `outrigger_build_info{version="${v}",node="v24.21.0"} 1\n`;

/** The API server as the fleet view sees it: pods, the webhook Deployment, and each pod's proxy. */
function fakeApi(answers: Record<string, { status: number; body: unknown }>): KubeApi {
  return {
    server: 'https://api.test',
    kubeconfig: '/dev/null',
    call: (_method, path) => Promise.resolve(answers[path] ?? { status: 404, body: 'not found' }),
  };
}
const proxy = (name: string, p: string) => `/api/v1/namespaces/shop/pods/${name}:7402/proxy${p}`;

test('the fleet view tells a ready sidecar, one that says why not, an unreachable one and version skew apart', async () => {
  const api = fakeApi({
    '/api/v1/namespaces/shop/pods': {
      status: 200,
      body: {
        items: [
          pod('a', 'outrigger:0.2.0'),
          pod('b', 'outrigger:0.2.0'),
          pod('c', 'outrigger:0.1.0'),
          pod('d', 'outrigger:0.2.0', 'Pending'),
          { ...pod('plain', 'app:1'), metadata: { name: 'plain', namespace: 'shop' } },
        ],
      },
    },
    '/apis/apps/v1/namespaces/outrigger-system/deployments/outrigger-webhook': {
      status: 200,
      body: { spec: { template: { spec: { containers: [{ image: 'registry.example/outrigger:0.2.0' }] } } } },
    },
    [proxy('a', '/readyz')]: { status: 200, body: { ready: true } },
    [proxy('a', '/metrics')]: { status: 200, body: buildInfo('0.2.0') },
    [proxy('b', '/readyz')]: { status: 503, body: { ready: false, detail: { meshCertificate: false } } },
    [proxy('b', '/metrics')]: { status: 200, body: buildInfo('0.2.0') },
    // The API server's own 503: the pod's address did not answer.
    [proxy('c', '/readyz')]: {
      status: 503,
      body: 'error trying to reach service: dial tcp: connect: connection refused',
    },
    [proxy('c', '/metrics')]: { status: 503, body: 'error trying to reach service' },
  });
  const fleet = await readFleet(api, 'shop');
  assert.equal(fleet.controlPlane, '0.2.0');
  assert.deepEqual(
    fleet.sidecars.map((s) => [s.pod, s.ready, s.version, s.skew, s.reason]),
    [
      ['a', 'yes', '0.2.0', false, ''],
      ['b', 'no', '0.2.0', false, 'no valid mesh certificate'],
      ['c', 'unreachable', '0.1.0', true, 'the pod proxy answered 503'],
      ['d', 'unreachable', '0.2.0', false, 'pod Pending'],
    ],
  );
  assert.match(
    formatFleet(fleet),
    /4 sidecar\(s\), 1 ready, 1 on another version than the control plane \(0\.2\.0\)$/,
  );
});
