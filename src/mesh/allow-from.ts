import type { AllowRule } from '../config/parse.ts';
import type { SpiffeId } from './spiffe.ts';

/**
 * outrigger.dev/allow-from (parsed and validated with every other annotation in src/config/):
 * which meshed callers may reach this pod. Entries name workloads of the pod's own trust domain,
 * so a caller from another trust domain never matches; no rules means no restriction.
 */
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
