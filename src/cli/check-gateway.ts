import { fail, pass, type CheckResult } from './check-result.ts';
import { GATEWAY_CONTROLLER } from '../config/gateway-options.ts';
import { CONTROL_PLANE } from './control-plane.ts';
import type { KubeApi } from './kube-api.ts';

/**
 * The gateway, when it is installed (manifests/gateway): its Deployment has every replica ready,
 * and the IngressClass it serves exists; with Gateway API on (--gateway-api=true), the API serves
 * the Gateway API CRDs and the GatewayClass exists. Not installed is no failure: the gateway is
 * optional.
 */
const { namespace, deployment, ingressClass, gatewayApiArg } = CONTROL_PLANE.gateway;
const GATEWAY_CLASS = `/apis/gateway.networking.k8s.io/v1/gatewayclasses/${ingressClass}`;
const DEPLOYMENT = `/apis/apps/v1/namespaces/${namespace}/deployments/${deployment}`;
const CLASS = `/apis/networking.k8s.io/v1/ingressclasses/${ingressClass}`;
const NAME = `${namespace}/${deployment}`;

interface DeploymentView {
  spec?: { replicas?: number; template?: { spec?: { containers?: { args?: string[] }[] } } };
  status?: { readyReplicas?: number };
}

export async function gatewayChecks(api: KubeApi): Promise<CheckResult[]> {
  const d = await api.call('GET', DEPLOYMENT);
  if (d.status === 404) return [];
  if (d.status !== 200)
    return [
      fail(
        'gateway',
        `reading ${DEPLOYMENT} answered ${d.status}`,
        'run check as a user who may read deployments',
      ),
    ];
  const { spec, status } = d.body as DeploymentView;
  const want = spec?.replicas ?? 1;
  const ready = status?.readyReplicas ?? 0;
  const out: CheckResult[] = [
    ready >= want && want > 0
      ? pass('gateway', `${NAME}: ${ready}/${want} replicas ready`)
      : fail(
          'gateway',
          `${NAME}: ${ready}/${want} replicas ready, so Ingresses of class ${ingressClass} are not (all) served`,
          `kubectl -n ${namespace} describe deployment ${deployment}; kubectl -n ${namespace} logs deploy/${deployment}`,
        ),
  ];
  const c = await api.call('GET', CLASS);
  out.push(
    c.status === 200
      ? classResult('gateway class', `IngressClass ${ingressClass}`, c.body, 'controller')
      : fail(
          'gateway class',
          `IngressClass ${ingressClass} is missing (${c.status}): the gateway serves no Ingress`,
          'outrigger install --gateway | kubectl apply -f -',
        ),
  );
  const gatewayApi = (spec?.template?.spec?.containers ?? []).some((x) => x.args?.includes(gatewayApiArg));
  if (gatewayApi) out.push(await gatewayApiCheck(api));
  return out;
}

/** The GatewayClass, which also tells whether the API serves the CRDs at all (404 on the group). */
async function gatewayApiCheck(api: KubeApi): Promise<CheckResult> {
  const g = await api.call('GET', GATEWAY_CLASS);
  if (g.status === 200)
    return classResult('gateway API', `GatewayClass ${ingressClass}`, g.body, 'controllerName');
  const group = await api.call('GET', '/apis/gateway.networking.k8s.io/v1');
  return group.status === 404
    ? fail(
        'gateway API',
        'the gateway runs with --gateway-api=true but the API serves no gateway.networking.k8s.io/v1: it never turns ready',
        'install the standard-channel CRDs of sigs.k8s.io/gateway-api v1.6: kubectl apply --server-side -f standard-install.yaml',
      )
    : fail(
        'gateway API',
        `GatewayClass ${ingressClass} is missing (${g.status}): no Gateway is served`,
        'outrigger install --gateway-api | kubectl apply -f -',
      );
}

/** A class names the controller that serves it: ours, or the gateway serves none of its objects. */
function classResult(
  name: string,
  what: string,
  body: unknown,
  field: 'controller' | 'controllerName',
): CheckResult {
  const controller = (body as { spec?: Record<string, unknown> } | undefined)?.spec?.[field];
  return controller === GATEWAY_CONTROLLER
    ? pass(name, `${what} (${field} ${GATEWAY_CONTROLLER})`)
    : fail(
        name,
        `${what} names ${field} ${JSON.stringify(controller)}, not ${GATEWAY_CONTROLLER}: the gateway serves nothing of it`,
        `set spec.${field} of ${what} to ${GATEWAY_CONTROLLER} (a class's controller cannot be changed: delete and re-create it)`,
      );
}
