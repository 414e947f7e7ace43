// The "restricted" Pod Security Standard checks that apply to one container (security.md section 3),
// so unit tests catch a regression before the API server's own check in the integration tests.
import type { Container } from '../../../src/injector/types.ts';

const ALLOWED_ADD = new Set(['NET_BIND_SERVICE']);

export function restrictedViolations(c: Container): string[] {
  const sc = (c.securityContext ?? {}) as {
    privileged?: boolean;
    allowPrivilegeEscalation?: boolean;
    runAsNonRoot?: boolean;
    runAsUser?: number;
    capabilities?: { add?: string[]; drop?: string[] };
    seccompProfile?: { type?: string };
  };
  const out: string[] = [];
  if (sc.privileged === true) out.push('privileged');
  if (sc.allowPrivilegeEscalation !== false) out.push('allowPrivilegeEscalation must be false');
  if (sc.runAsNonRoot !== true) out.push('runAsNonRoot must be true');
  if (sc.runAsUser === 0) out.push('runAsUser must not be 0');
  if (!sc.capabilities?.drop?.includes('ALL')) out.push('capabilities.drop must include ALL');
  for (const cap of sc.capabilities?.add ?? []) if (!ALLOWED_ADD.has(cap)) out.push(`adds ${cap}`);
  const seccomp = sc.seccompProfile?.type;
  if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') out.push('seccompProfile must be set');
  return out;
}
