import assert from 'node:assert/strict';
import { test } from 'node:test';
import { identityChecks } from '../../../src/cli/check-identity.ts';
import type { KubeApi } from '../../../src/cli/kube-api.ts';
import { makeCa } from '../../../src/cli/pki.ts';

const DAY = 86_400_000;
const NOW = Date.parse('2026-12-04T00:00:00Z');
const SECRET = '/api/v1/namespaces/outrigger-system/secrets/outrigger-identity-ca';

function apiWith(answer: { status: number; body: unknown }): KubeApi {
  return {
    server: 'https://api.test',
    kubeconfig: '/dev/null',
    call: (_m, path) => Promise.resolve(path === SECRET ? answer : { status: 404, body: '' }),
  };
}
const caSecret = (notAfter: number) => ({
  status: 200,
  body: {
    data: {
      'tls.crt': Buffer.from(
        makeCa('outrigger identity issuer', {
          notBefore: new Date(NOW - 100 * DAY),
          notAfter: new Date(notAfter),
        }).certPem,
      ).toString('base64'),
    },
  },
});

test("check names the mesh CA's expiry: fails when expired, warns within 14 days, passes after; silent without mTLS", async () => {
  const outcome = async (answer: { status: number; body: unknown }) =>
    (await identityChecks(apiWith(answer), NOW)).map((r) => `${r.outcome} ${r.message}`);
  assert.match(
    (await outcome(caSecret(NOW - DAY)))[0] ?? '',
    /^fail .*expired on .*signs certificates no sidecar accepts/,
  );
  assert.match((await outcome(caSecret(NOW + 5 * DAY)))[0] ?? '', /^warn .*expires on/);
  assert.match((await outcome(caSecret(NOW + 300 * DAY)))[0] ?? '', /^pass .*valid until/);
  assert.deepEqual(await outcome({ status: 404, body: '' }), [], 'no mesh CA installed: nothing to say');
  assert.match(
    (await outcome({ status: 200, body: { data: { 'tls.crt': 'bm90IGEgY2VydA==' } } }))[0] ?? '',
    /^fail .*no PEM certificate/,
  );
});

test("check's advice for install's mesh CA, whose root key was not kept, is bringing your own; never a change of the install", async () => {
  const expired = caSecret(NOW - DAY);
  const made = {
    ...expired,
    body: { ...expired.body, metadata: { labels: { 'app.kubernetes.io/name': 'outrigger' } } },
  };
  const [byInstall] = await identityChecks(apiWith(made), NOW);
  assert.match(
    byInstall?.fix ?? '',
    /install did not keep the root's key, so bring your own CA: scripts\/gen-mesh-ca/,
  );
  const [own] = await identityChecks(apiWith(expired), NOW);
  assert.match(own?.fix ?? '', /with the same root/);
  for (const fix of [byInstall?.fix, own?.fix]) assert.doesNotMatch(fix ?? '', /outrigger install|apply -k/);
});
