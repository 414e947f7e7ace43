// `outrigger install --mesh-routes` against the real API server: the in-cluster webhook's Deployment
// gets the flag, and a later `outrigger install` without it reads the install and keeps it (an
// upgrade must not turn mesh routes off for the pods injected next).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, test } from 'node:test';
import { clusterShell } from '../harness/cli.ts';
import { startCluster, type TestCluster } from '../harness/cluster.ts';
import { testBinaries } from '../harness/tools.ts';

const cli = `node ${path.join(import.meta.dirname, '../../src/main.ts')}`;
let cluster: TestCluster | undefined;
after(async () => {
  await cluster?.stop();
});

test(
  'install --mesh-routes gives the webhook the flag; a re-run without it keeps it',
  { timeout: 180_000 },
  async (t) => {
    cluster = await startCluster(t);
    if (!cluster) return;
    const sh = clusterShell(
      () => cluster?.kubeconfigPath ?? '',
      () => testBinaries().kubectl,
    );
    const webhookArgs = (): string => {
      const r = sh(
        `"$KUBECTL" -n outrigger-system get deployment outrigger-webhook -o jsonpath='{.spec.template.spec.containers[0].args}'`,
      );
      assert.equal(r.status, 0, r.stderr);
      return r.stdout;
    };
    const first = sh(`${cli} install --mesh-routes | "$KUBECTL" apply -f -`);
    assert.equal(first.status, 0, first.stderr);
    assert.match(webhookArgs(), /"--mesh-routes=true"/);

    const again = sh(`${cli} install | "$KUBECTL" apply -f -`);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stderr, /keeping mesh routes on by default for injected pods/);
    assert.match(again.stdout, /deployment\.apps\/outrigger-webhook unchanged/);
    assert.match(webhookArgs(), /"--mesh-routes=true"/);
  },
);
