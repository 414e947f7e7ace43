import { CONTROLLER } from '../../../src/gateway/classes.ts';
import {
  createGatewayStore,
  type GatewayStore,
  type GatewayStoreOptions,
} from '../../../src/gateway/store.ts';
import type { FakeClock } from '../../harness/fake-clock.ts';
import { FakeKubeApi } from '../../harness/fake-kube-api.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';

/** The gateway store's tests: a fake API holding our IngressClass, and the store opened on it. */
export const ING = '/apis/networking.k8s.io/v1/ingresses';
export const CLS = '/apis/networking.k8s.io/v1/ingressclasses';

type Obj = Parameters<FakeKubeApi['put']>[1];
export const put = (api: FakeKubeApi, path: string, o: unknown): void => api.put(path, o as Obj);

export function apiWithOurClass(): FakeKubeApi {
  const api = new FakeKubeApi();
  put(api, CLS, { metadata: { name: 'outrigger' }, spec: { controller: CONTROLLER } });
  return api;
}

export function openStore(
  api: FakeKubeApi,
  clock: FakeClock,
  extra: Partial<GatewayStoreOptions> = {},
): Promise<GatewayStore> {
  return createGatewayStore({
    api,
    clock,
    random: () => 0.5,
    logger: memoryLogger(),
    classPolicy: { controller: CONTROLLER, watchWithoutClass: false },
    ...extra,
  });
}
