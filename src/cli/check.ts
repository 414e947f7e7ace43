import { Command } from 'commander';
import { OutriggerError, errorMessage } from '../shared/errors.ts';
import { checkOptions, type CheckConfig } from '../config/person-options.ts';
import { defaultKubeconfig, wantsJson } from './common.ts';
import { personTable } from './option-table.ts';
import type { CheckResult, Outcome } from './check-result.ts';
import type { KubeApi } from './kube-api.ts';

/**
 * `outrigger check`, like `linkerd check`: is the control plane installed and usable? Each check
 * passes, warns or fails, and every failure says what to do. Exit 1 when any check fails.
 * The checks themselves live in check-steps.ts.
 */
const MARK: Record<Outcome, string> = { pass: '[ok]  ', warn: '[warn]', fail: '[FAIL]' };

export function formatChecks(results: CheckResult[]): string {
  const lines = results.map(
    (r) => `${MARK[r.outcome]} ${r.check}: ${r.message}${r.fix ? `\n         fix: ${r.fix}` : ''}`,
  );
  const failed = results.filter((r) => r.outcome === 'fail').length;
  const warned = results.filter((r) => r.outcome === 'warn').length;
  lines.push(
    '',
    failed === 0
      ? `all checks passed${warned ? ` (${warned} warning(s))` : ''}`
      : `${failed} check(s) failed`,
  );
  return lines.join('\n');
}

export function checkCommand(): Command {
  const cmd = new Command('check').description(
    'check the installation: API server, webhook configuration and certificate, webhook endpoints, meshed namespaces and their RBAC, pods without their sidecar, strict mTLS without the issuer or trust bundle, the mesh CA expiry, the gateway when installed',
  );
  return personTable<keyof typeof checkOptions, CheckConfig>(cmd, checkOptions, async (flags) => {
    const kubeconfig = flags.kubeconfig ?? defaultKubeconfig();
    if (!kubeconfig)
      throw new OutriggerError('config_invalid', 'no kubeconfig: pass --kubeconfig PATH or set KUBECONFIG');
    const [{ openKubeApi }, steps] = await Promise.all([import('./kube-api.ts'), import('./check-steps.ts')]);
    let api: KubeApi | undefined;
    const results: CheckResult[] = [];
    try {
      api = await openKubeApi(kubeconfig);
    } catch (e) {
      results.push({
        check: 'kubeconfig',
        outcome: 'fail',
        message: errorMessage(e),
        fix: 'pass --kubeconfig, or fix the file',
      });
    }
    if (api) results.push(...(await steps.runChecks(api, Date.now())));
    if (flags.admin !== undefined) results.push(...(await steps.sidecarChecks(flags.admin, Date.now())));
    process.stdout.write(
      (wantsJson(flags) ? JSON.stringify(results, null, 2) : formatChecks(results)) + '\n',
    );
    if (results.some((r) => r.outcome === 'fail')) process.exitCode = 1;
  });
}
