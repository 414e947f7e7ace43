// Test helpers for the injection webhook: certificates from the project's own script, and a
// Secret-volume directory written and rotated the way kubelet's AtomicWriter does it.
import { spawnSync } from 'node:child_process';
import https from 'node:https';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { repoRoot } from './tools.ts';

export const opensslAvailable = (): boolean => spawnSync('openssl', ['version']).status === 0;

export interface WebhookCerts {
  dir: string;
  caPem: string;
  certPem: string;
  keyPem: string;
  /** The caBundle value for a webhook configuration. */
  caBundle: string;
}

/** Runs scripts/gen-webhook-certs; a second call on the same dir re-issues under the same CA. */
export function makeWebhookCerts(dir: string, extra: string[] = ['--ip', '127.0.0.1']): WebhookCerts {
  const r = spawnSync('bash', [path.join(repoRoot, 'scripts/gen-webhook-certs'), '--out', dir, ...extra], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`gen-webhook-certs failed: ${r.stderr}`);
  const read = (f: string): string => readFileSync(path.join(dir, f), 'utf8');
  return {
    dir,
    caPem: read('ca.crt'),
    certPem: read('tls.crt'),
    keyPem: read('tls.key'),
    caBundle: read('ca-bundle.b64').trim(),
  };
}

let seq = 0;

function writeVersion(dir: string, files: Record<string, string>): string {
  const version = `..${Date.now()}_${process.pid}_${seq++}`;
  mkdirSync(path.join(dir, version));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, version, name), text);
  return version;
}

/** A Secret volume: files in ..VERSION, `..data` links to it, each name links through ..data. */
export function writeSecretDir(dir: string, files: Record<string, string>): void {
  mkdirSync(dir, { recursive: true });
  symlinkSync(writeVersion(dir, files), path.join(dir, '..data'));
  for (const name of Object.keys(files)) symlinkSync(path.join('..data', name), path.join(dir, name));
}

/** kubelet's update: new version dir, ..data_tmp -> it, atomic rename over ..data, old one removed. */
export function rotateSecretDir(dir: string, files: Record<string, string>): void {
  const old = readdirSync(dir).filter((n) => n.startsWith('..') && n !== '..data');
  symlinkSync(writeVersion(dir, files), path.join(dir, '..data_tmp'));
  renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  for (const o of old) rmSync(path.join(dir, o), { recursive: true, force: true });
}

export interface RawReply {
  status: number;
  warnings: string[];
  body: Record<string, unknown>;
}

/**
 * One API request that also returns the `Warning` headers, where admission warnings arrive
 * (KubeAdmin.request returns bodies only). Never throws on a status: callers assert it.
 */
export function kubeRaw(
  server: string,
  caPem: string,
  token: string,
  method: string,
  urlPath: string,
  body?: unknown,
): Promise<RawReply> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = https.request(
      new URL(urlPath, server),
      {
        method,
        ca: caPem,
        agent: false,
        timeout: 30_000,
        headers: {
          authorization: `Bearer ${token}`,
          accept: 'application/json',
          ...(payload ? { 'content-type': 'application/json' } : {}),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => {
          const raw: string | string[] | undefined = res.headers.warning;
          const list: string[] = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
          resolve({
            status: res.statusCode ?? 0,
            // `299 - "text"`: the agent is "-" and the text is a quoted string.
            warnings: list.map((w) => w.replace(/^299 - "(.*)"$/, '$1').replaceAll('\\"', '"')),
            body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
          });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${urlPath}: timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}
