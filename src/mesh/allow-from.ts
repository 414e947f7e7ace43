import { OutriggerError } from '../shared/errors.ts';
import { validNamespace, validServiceAccount, type SpiffeId } from './spiffe.ts';

/**
 * outrigger.dev/allow-from: which meshed callers may reach this pod, as `namespace/serviceaccount`
 * or `namespace/*`, comma-separated. Entries name workloads of the pod's own trust domain: a
 * caller from another trust domain never matches. An empty list means "no restriction".
 */
export interface AllowRule {
  namespace: string;
  /** '*' for every service account of the namespace. */
  serviceAccount: string;
}

export const ALLOW_FROM_ALLOWED = 'comma-separated namespace/serviceaccount or namespace/* entries';

export function parseAllowFrom(key: string, value: string): AllowRule[] {
  const rules: AllowRule[] = [];
  for (const raw of value.split(',')) {
    const entry = raw.trim();
    if (!entry) continue;
    const [namespace = '', serviceAccount = '', extra] = entry.split('/');
    if (
      extra !== undefined ||
      !validNamespace(namespace) ||
      !(serviceAccount === '*' || validServiceAccount(serviceAccount))
    )
      throw new OutriggerError(
        'config_invalid',
        `invalid ${key}=${JSON.stringify(value)}: entry ${JSON.stringify(entry)} is not allowed; allowed: ${ALLOW_FROM_ALLOWED}, such as shop/checkout, monitoring/*`,
      );
    rules.push({ namespace, serviceAccount });
  }
  return rules;
}

/** Whether a caller may pass; with no rules everyone may. */
export function allows(
  rules: readonly AllowRule[],
  trustDomain: string,
  caller: SpiffeId | undefined,
): boolean {
  if (rules.length === 0) return true;
  if (!caller || caller.trustDomain !== trustDomain) return false;
  return rules.some(
    (r) =>
      r.namespace === caller.namespace &&
      (r.serviceAccount === '*' || r.serviceAccount === caller.serviceAccount),
  );
}

export const formatAllowFrom = (rules: readonly AllowRule[]): string =>
  rules.map((r) => `${r.namespace}/${r.serviceAccount}`).join(',');
