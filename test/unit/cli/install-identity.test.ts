// `outrigger install --identity` offline: the issuer's manifests and a mesh CA the issuer loads,
// whose chain openssl verifies, with no key of the root anywhere in the output (the real apply
// and re-runs are in test/integration/install-identity.test.ts).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { issueIntermediate, issueServing, makeCa } from '../../../src/cli/pki.ts';
import { loadCa } from '../../../src/mesh/ca.ts';
import { runCli } from '../../harness/cli.ts';

interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  type?: string;
}

const DAY = 86_400_000;
const unb64 = (s = ''): string => Buffer.from(s, 'base64').toString('utf8');

function scratch(t: { after(fn: () => void): void }): (name: string, text: string) => string {
  const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-mesh-ca-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return (name, text) => {
    writeFileSync(path.join(dir, name), text);
    return path.join(dir, name);
  };
}

const openssl = (...args: string[]): string => execFileSync('openssl', args, { encoding: 'utf8' });

test('an intermediate CA has pathlen 0 and openssl verifies root -> intermediate -> leaf', (t) => {
  const write = scratch(t);
  const validity = { notBefore: new Date(Date.now() - DAY), notAfter: new Date(Date.now() + DAY) };
  const root = makeCa('test root', validity);
  const issuing = issueIntermediate(root, 'test issuer', validity);
  const leaf = issueServing(issuing, ['svc.test'], validity);
  assert.ok(issuing.cert.ca && issuing.cert.checkIssued(root.cert));
  const rootFile = write('root.pem', root.certPem);
  const issuingFile = write('issuing.pem', issuing.certPem);
  assert.match(openssl('x509', '-noout', '-text', '-in', issuingFile), /CA:TRUE, pathlen:0/);
  assert.match(openssl('verify', '-x509_strict', '-CAfile', rootFile, issuingFile), /: OK/);
  const leafFile = write('leaf.pem', leaf.certPem);
  assert.match(
    openssl('verify', '-x509_strict', '-CAfile', rootFile, '-untrusted', issuingFile, leafFile),
    /: OK/,
  );
});

test('install --identity prints the issuer and a mesh CA it loads; the root key is not printed', async (t) => {
  const r = await runCli(['install', '--identity']);
  assert.equal(r.status, 0, r.stderr);
  const objs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
  const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`);
  for (const k of [
    'Deployment/outrigger-identity',
    'Service/outrigger-identity',
    'ServiceAccount/outrigger-identity',
    'ClusterRole/outrigger-identity',
    'ClusterRoleBinding/outrigger-identity',
    'PodDisruptionBudget/outrigger-identity',
  ])
    assert.ok(kinds.includes(k), `${k} in ${kinds.join(', ')}`);
  const secret = objs.find((o) => o.kind === 'Secret' && o.metadata.name === 'outrigger-identity-ca');
  const bundle = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.namespace === 'outrigger-system');
  assert.ok(secret?.data && bundle?.data, kinds.join(', '));
  assert.ok(
    kinds.indexOf('Secret/outrigger-identity-ca') < kinds.indexOf('Deployment/outrigger-identity'),
    'the CA before the issuer that mounts it',
  );
  assert.equal(secret.metadata.labels?.['app.kubernetes.io/name'], 'outrigger', 'uninstall deletes it');
  const root = unb64(secret.data['ca.crt']);
  assert.equal(bundle.data['ca.crt'], root, 'the trust bundle is the root');

  const write = scratch(t);
  const files = {
    certFile: write('tls.crt', unb64(secret.data['tls.crt'])),
    keyFile: write('tls.key', unb64(secret.data['tls.key'])),
    trustBundleFile: write('ca.crt', root),
  };
  const ca = await loadCa(files, Date.now());
  assert.equal(ca.chain.length, 1, 'the issuer sends the intermediate, not the root');
  assert.match(openssl('verify', '-x509_strict', '-CAfile', files.trustBundleFile, files.certFile), /: OK/);

  // Every private key printed is the intermediate's; none is the root's.
  const rootKey = new X509Certificate(root).publicKey.export({ format: 'der', type: 'spki' });
  const keys = [...r.stdout.matchAll(/tls\.key: (\S+)/g)].map((m) =>
    createPublicKey(createPrivateKey(unb64(m[1]))).export({ format: 'der', type: 'spki' }),
  );
  assert.ok(keys.length > 0);
  assert.ok(
    keys.every((k) => !k.equals(rootKey)),
    'no key of the root in the output',
  );
  assert.match(r.stderr, /a new mesh CA: .*the root's key is not kept/);
});

test('install --identity --gateway-mtls: the gateway needs no separate issuer install; --webhook-url keeps the issuer', async () => {
  const r = await runCli([
    'install',
    '--identity',
    '--gateway-mtls',
    '--webhook-url',
    'https://127.0.0.1:8443',
  ]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /certificate comes from outrigger identity, and it is not ready/);
  assert.doesNotMatch(r.stderr, /manifests\/identity|install --identity adds it/);
  assert.match(r.stdout, /name: outrigger-identity\n/);
  assert.doesNotMatch(r.stdout, /kind: Deployment\nmetadata:\n {2}name: outrigger-webhook/);
  const without = await runCli(['install', '--gateway-mtls']);
  assert.match(without.stderr, /install --identity adds it/);
});
