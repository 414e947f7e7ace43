import assert from 'node:assert/strict';
import { test } from 'node:test';
import { status as httpStatus } from '../../harness/fake-kube-api.ts';
import { StatusPublisher } from '../../../src/gateway/status.ts';
import { FakeClock } from '../../harness/fake-clock.ts';
import { memoryLogger } from '../../harness/memory-logger.ts';
import { rawIngress } from './ingress-fixtures.ts';
import { apiWithOurClass, ING, openStore, put } from './store-fixtures.ts';

test('status.loadBalancer is written once per served Ingress, never for others, and retried after a failure', async () => {
  const api = apiWithOurClass();
  const raws = new Map<string, Record<string, unknown>>();
  for (const [name, className] of [
    ['a', 'outrigger'],
    ['b', 'outrigger'],
    ['theirs', 'nginx'],
  ] as const) {
    const raw = rawIngress({
      name,
      namespace: 'shop',
      className,
      rules: [{ host: `${name}.com`, paths: [{ path: '/', svc: 's' }] }],
    });
    raws.set(name, raw);
    put(api, ING, raw);
  }
  const clock = new FakeClock();
  const store = await openStore(api, clock);
  await clock.advance(0);
  const patches: { path: string; body: unknown }[] = [];
  let failures = 1;
  const log = memoryLogger();
  // The API server's side of a status write: the object changes and watchers see it.
  const mergePatch = (path: string, body: unknown): Promise<void> => {
    if (failures-- > 0) return Promise.reject(httpStatus(500));
    patches.push({ path, body });
    const name = path.split('/').at(-2) ?? '';
    put(api, ING, { ...raws.get(name), ...(body as object) });
    return Promise.resolve();
  };
  const publisher = new StatusPublisher({
    api: { mergePatch },
    addresses: ['192.0.2.10', 'lb.example.com'],
    served: () => store.served(),
    clock,
    logger: log,
    resyncMs: 30_000,
  });
  assert.equal(await publisher.sync(), 1, 'the first write failed, the second went through');
  assert.ok(
    log.lines.some((l) => l.msg === 'Ingress status not written; retrying later' && l.ingress === 'shop/a'),
  );
  await clock.advance(30_000);
  await clock.advance(0);
  assert.deepEqual(patches.map((p) => p.path).sort(), [
    '/apis/networking.k8s.io/v1/namespaces/shop/ingresses/a/status',
    '/apis/networking.k8s.io/v1/namespaces/shop/ingresses/b/status',
  ]);
  assert.deepEqual(patches[0]?.body, {
    status: { loadBalancer: { ingress: [{ ip: '192.0.2.10' }, { hostname: 'lb.example.com' }] } },
  });
  assert.deepEqual(
    store.served().map((i) => i.status?.addresses),
    [
      ['192.0.2.10', 'lb.example.com'],
      ['192.0.2.10', 'lb.example.com'],
    ],
  );
  assert.equal(await publisher.sync(), 0, 'nothing left to write once the statuses agree');
  publisher.close();
  await store.close();
});
