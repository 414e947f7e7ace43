import { errorMessage } from '../shared/errors.ts';
import { adminBase, adminGet } from './admin-url.ts';
import { REINSTALL, fail, pass, type CheckResult } from './check-result.ts';
import { dataPlaneChecks } from './check-data-plane.ts';
import { gatewayChecks } from './check-gateway.ts';
import { identityChecks } from './check-identity.ts';
import { namespaceChecks, webhookRbac } from './check-namespaces.ts';
import { certificateChecks, endpointCheck, type Webhook } from './check-webhook.ts';
import { CONTROL_PLANE } from './control-plane.ts';
import { apiVersion, type KubeApi } from './kube-api.ts';

/** Every cluster check, in order; a check whose input is missing is not run. */
export async function runChecks(api: KubeApi, now: number): Promise<CheckResult[]> {
  const out: CheckResult[] = [];
  let webhooks: Webhook[] | undefined;
  try {
    out.push(pass('API server', `${api.server} answers, Kubernetes ${await apiVersion(api)}`));
  } catch (e) {
    out.push(
      fail(
        'API server',
        errorMessage(e),
        `check the kubeconfig ${api.kubeconfig} and its current context (kubectl cluster-info)`,
      ),
    );
    return out;
  }
  const config = await api.call(
    'GET',
    `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${CONTROL_PLANE.webhookConfiguration}`,
  );
  if (config.status !== 200) {
    out.push(
      config.status === 404
        ? fail(
            'webhook configuration',
            `MutatingWebhookConfiguration ${CONTROL_PLANE.webhookConfiguration} is not installed`,
            REINSTALL,
          )
        : fail(
            'webhook configuration',
            `reading it answered ${config.status}`,
            'run check as a user who may read mutatingwebhookconfigurations',
          ),
    );
  } else {
    webhooks = (config.body as { webhooks?: Webhook[] }).webhooks ?? [];
    out.push(
      pass('webhook configuration', `${CONTROL_PLANE.webhookConfiguration}: ${webhooks.length} webhook(s)`),
    );
    out.push(...(await certificateChecks(api, webhooks, now)));
    out.push(await endpointCheck(api, webhooks));
    out.push(await webhookRbac(api));
  }
  out.push(...(await namespaceChecks(api, webhooks)));
  out.push(...(await dataPlaneChecks(api)));
  out.push(...(await identityChecks(api, now)));
  out.push(...(await gatewayChecks(api)));
  return out;
}

/** A running sidecar, through its admin API: ready, and its token not about to expire. */
export async function sidecarChecks(admin: string, now: number): Promise<CheckResult[]> {
  try {
    const base = adminBase(admin);
    const d = (await adminGet(base, '/debug/discovery', 'json')).body as {
      ready?: boolean;
      staleServices?: number;
      counters?: { apiFailures?: number; tokenExpiresAtMs?: number };
    };
    const out: CheckResult[] = [
      d.ready
        ? pass('sidecar discovery', `ready; ${d.staleServices ?? 0} stale Service(s)`)
        : fail(
            'sidecar discovery',
            `not ready; ${d.counters?.apiFailures ?? 0} API request(s) failed`,
            'outrigger status --admin ... ; kubectl logs POD -c outrigger-proxy',
          ),
    ];
    const exp = d.counters?.tokenExpiresAtMs;
    if (exp !== undefined)
      out.push(
        exp > now
          ? pass('sidecar token', `expires ${new Date(exp).toISOString()} (kubelet renews it)`)
          : fail(
              'sidecar token',
              `expired ${new Date(exp).toISOString()}`,
              'kubelet did not renew the projected token: check the node',
            ),
      );
    return out;
  } catch (e) {
    return [fail('sidecar', errorMessage(e), 'kubectl port-forward POD 7402, then --admin 127.0.0.1:7402')];
  }
}
