import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MESH_PORT_NAME as MESH_PORT } from '../../../src/config/options.ts';
import { mergeService } from '../../../src/discovery/merge.ts';
import { SERVICE_NAME_LABEL, type KEndpointSlice, type KService } from '../../../src/discovery/objects.ts';
import { meshedAddresses } from '../../../src/proxy/egress-plan.ts';

test('which endpoints are meshed comes from the EndpointSlices of a Service that declares the mesh port', () => {
  const svc = (ports: { name: string; port: number; targetPort: number | string }[]): KService => ({
    kind: 'Service',
    metadata: { name: 'api', namespace: 'shop' },
    spec: { clusterIP: '10.96.0.10', ports },
  });
  // As the EndpointSlice controller writes them: a pod without the named port gets a slice
  // without that port.
  const slice = (name: string, ip: string, ports: { name: string; port: number }[]): KEndpointSlice => ({
    kind: 'EndpointSlice',
    metadata: { name, namespace: 'shop', labels: { [SERVICE_NAME_LABEL]: 'api' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [ip], conditions: { ready: true } }],
    ports,
  });
  const http = { name: 'http', port: 80, targetPort: 8080 };
  const mesh = { name: MESH_PORT, port: 7403, targetPort: MESH_PORT };
  const slices = [
    slice('api-a', '10.1.0.1', [
      { name: 'http', port: 8080 },
      { name: MESH_PORT, port: 7403 },
    ]),
    slice('api-b', '10.1.0.2', [{ name: 'http', port: 8080 }]),
  ];
  assert.deepEqual([...(meshedAddresses(mergeService(svc([http, mesh]), slices)) ?? [])], ['10.1.0.1']);
  assert.equal(meshedAddresses(mergeService(svc([http]), slices)), undefined, 'not declared: not known');
  const misnamed = { ...mesh, targetPort: 'outrigger-mseh' };
  const unresolved = slices.map((s) => ({ ...s, ports: [{ name: 'http', port: 8080 }] }));
  assert.equal(
    meshedAddresses(mergeService(svc([http, misnamed]), unresolved)),
    undefined,
    'a mesh port that resolves for no pod: not known',
  );
});
