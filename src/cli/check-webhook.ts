import { X509Certificate } from 'node:crypto';
import { request } from 'node:https';
import { connect } from 'node:tls';
import { errorMessage } from '../shared/errors.ts';
import { EXPIRY_WARN_MS, fail, pass, warn, type CheckResult } from './check-result.ts';
import { CONTROL_PLANE } from './control-plane.ts';
import type { KubeApi } from './kube-api.ts';

/**
 * The webhook's side of `outrigger check`: the caBundle against the certificate the webhook
 * serves, its validity, and whether anything answers.
 */
const { namespace: SYSTEM, service: SERVICE } = CONTROL_PLANE;
/** A serving certificate this close to its end is a warning. */

export interface Webhook {
  name: string;
  clientConfig: { url?: string; caBundle?: string; service?: { name: string; namespace: string } };
}

/**
 * The `outrigger install` that repairs this install without changing how the webhook is called:
 * a URL install is named with its URL, so following the advice never moves it in-cluster.
 */
export function installKeeping(webhooks: Webhook[] | undefined, extra = ''): string {
  const url = webhooks?.[0]?.clientConfig.url;
  return `outrigger install${url ? ` --webhook-url ${new URL(url).origin}` : ''}${extra} | kubectl apply -f -`;
}

const SECRET = `Secret ${SYSTEM}/${CONTROL_PLANE.tlsSecret}`;

/** After a URL install's Secret changed, the webhook it runs must serve the new certificate. */
const serveSecretAt = (webhooks: Webhook[]): string => {
  const url = webhooks[0]?.clientConfig.url;
  return url
    ? `, then restart the webhook at ${new URL(url).origin} with the tls.crt and tls.key of ${SECRET}`
    : '';
};

function bundleCas(webhooks: Webhook[]): { cas: X509Certificate[]; error?: string } {
  const b64 = webhooks[0]?.clientConfig.caBundle;
  if (!b64) return { cas: [], error: 'the webhooks have no caBundle' };
  if (webhooks.some((w) => w.clientConfig.caBundle !== b64))
    return { cas: [], error: 'the webhooks carry different caBundles' };
  const pems =
    Buffer.from(b64, 'base64')
      .toString('utf8')
      .match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? [];
  try {
    return { cas: pems.map((p) => new X509Certificate(p)) };
  } catch (e) {
    return { cas: [], error: `the caBundle does not parse: ${errorMessage(e)}` };
  }
}

/** The certificate the webhook serves: from its URL, or from the Secret the Deployment mounts. */
async function servingCertificate(
  api: KubeApi,
  webhooks: Webhook[],
): Promise<{ cert?: X509Certificate; from: string; error?: string }> {
  const url = webhooks[0]?.clientConfig.url;
  if (url) {
    const from = `the webhook at ${new URL(url).origin}`;
    try {
      return { cert: await peerCertificate(new URL(url)), from };
    } catch (e) {
      return { from, error: errorMessage(e) };
    }
  }
  const from = SECRET;
  const r = await api.call('GET', `/api/v1/namespaces/${SYSTEM}/secrets/${CONTROL_PLANE.tlsSecret}`);
  if (r.status !== 200) return { from, error: `reading it answered ${r.status}` };
  const crt = (r.body as { data?: Record<string, string> }).data?.['tls.crt'];
  try {
    return { cert: new X509Certificate(Buffer.from(crt ?? '', 'base64')), from };
  } catch (e) {
    return { from, error: `its tls.crt does not parse: ${errorMessage(e)}` };
  }
}

function peerCertificate(url: URL): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    // Verification is done below against the caBundle, the way the API server does it.
    const socket = connect({
      host,
      port: Number(url.port || 443),
      rejectUnauthorized: false,
      servername: /^[\d.:]+$/.test(host) ? undefined : host,
    });
    socket.setTimeout(5_000, () => socket.destroy(new Error('no TLS handshake within 5s')));
    socket.once('secureConnect', () => {
      const cert = socket.getPeerX509Certificate();
      socket.end();
      if (cert) resolve(cert);
      else reject(new Error('no certificate presented'));
    });
    socket.once('error', reject);
  });
}

export async function certificateChecks(
  api: KubeApi,
  webhooks: Webhook[],
  now: number,
): Promise<CheckResult[]> {
  const { cas, error } = bundleCas(webhooks);
  if (error)
    return [
      fail('caBundle', error, `${installKeeping(webhooks)} (it sets the caBundle to the CA of ${SECRET})`),
    ];
  const serving = await servingCertificate(api, webhooks);
  const url = webhooks[0]?.clientConfig.url;
  if (!serving.cert)
    return [
      fail(
        'serving certificate',
        `cannot read it from ${serving.from}: ${serving.error}`,
        url
          ? `start the webhook at ${new URL(url).origin} with the tls.crt and tls.key of ${SECRET}`
          : `${installKeeping(webhooks)} (it creates the Secret)`,
      ),
    ];
  const cert = serving.cert;
  const issuer = cas.find((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey));
  const out: CheckResult[] = [];
  out.push(
    issuer
      ? pass('caBundle', `matches the serving certificate from ${serving.from} (issuer ${issuer.subject})`)
      : fail(
          'caBundle',
          `the serving certificate from ${serving.from} (issuer ${cert.issuer}) is not signed by the caBundle's CA (${cas.map((c) => c.subject).join(', ')}): the API server refuses to call the webhook`,
          url
            ? `${installKeeping(webhooks)} (it sets the caBundle to the CA of ${SECRET})${serveSecretAt(webhooks).replace(', then restart', ', and restart')}`
            : `${installKeeping(webhooks)} (it keeps the certificate of ${SECRET} and sets the caBundle to its CA)`,
        ),
  );
  const until = Date.parse(cert.validTo);
  const from = Date.parse(cert.validFrom);
  if (until <= now)
    out.push(
      fail(
        'certificate expiry',
        `the serving certificate expired on ${cert.validTo}`,
        `${installKeeping(webhooks, ' --rotate-certificate')}${serveSecretAt(webhooks)}`,
      ),
    );
  else if (from > now)
    out.push(
      fail(
        'certificate expiry',
        `the serving certificate is not valid before ${cert.validFrom}`,
        'check the clocks, or re-issue it',
      ),
    );
  else if (until - now < EXPIRY_WARN_MS)
    out.push(
      warn(
        'certificate expiry',
        `the serving certificate expires on ${cert.validTo}`,
        `rotate it soon: ${installKeeping(webhooks, ' --rotate-certificate')}${serveSecretAt(webhooks)}`,
      ),
    );
  else out.push(pass('certificate expiry', `valid until ${cert.validTo}`));
  return out;
}

export async function endpointCheck(api: KubeApi, webhooks: Webhook[]): Promise<CheckResult> {
  const url = webhooks[0]?.clientConfig.url;
  if (url) {
    const { cas } = bundleCas(webhooks);
    try {
      const status = await httpsStatus(
        new URL('/healthz', url),
        cas.map((c) => c.toString()),
      );
      return status === 200
        ? pass('webhook endpoints', `the webhook at ${new URL(url).origin} answers /healthz`)
        : fail(
            'webhook endpoints',
            `the webhook at ${new URL(url).origin} answered /healthz with ${status}`,
            'check the webhook process and its log',
          );
    } catch (e) {
      return fail(
        'webhook endpoints',
        `no webhook answers at ${new URL(url).origin} (${errorMessage(e)}); pods of opted-in namespaces cannot be created (failurePolicy Fail)`,
        'start the webhook (outrigger webhook) at that address',
      );
    }
  }
  const r = await api.call(
    'GET',
    `/apis/discovery.k8s.io/v1/namespaces/${SYSTEM}/endpointslices?labelSelector=${encodeURIComponent(`kubernetes.io/service-name=${SERVICE}`)}`,
  );
  if (r.status !== 200)
    return fail(
      'webhook endpoints',
      `listing the EndpointSlices of ${SYSTEM}/${SERVICE} answered ${r.status}`,
      'run check as a user who may list endpointslices there',
    );
  const slices = (r.body as { items?: { endpoints?: { conditions?: { ready?: boolean } }[] }[] }).items ?? [];
  const ready = slices.flatMap((s) => s.endpoints ?? []).filter((e) => e.conditions?.ready !== false).length;
  return ready > 0
    ? pass('webhook endpoints', `Service ${SYSTEM}/${SERVICE} has ${ready} ready endpoint(s)`)
    : fail(
        'webhook endpoints',
        `Service ${SYSTEM}/${SERVICE} has no ready endpoint: pods of opted-in namespaces cannot be created (failurePolicy Fail)`,
        `kubectl -n ${SYSTEM} get deploy,pods; kubectl -n ${SYSTEM} describe pods (is the image pullable? is the Secret there?)`,
      );
}

function httpsStatus(url: URL, ca: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, signal: AbortSignal.timeout(5_000) }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}
