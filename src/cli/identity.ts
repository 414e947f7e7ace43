import { Command } from 'commander';
import { identityOptions, type IdentityConfig, type IdentityOptionName } from '../config/identity-options.ts';
import { loadTable } from '../config/resolve.ts';
import { createLogger, type LogLevel } from '../shared/log.ts';
import { TABLE_HELP, addTable } from './option-table.ts';

/**
 * `outrigger identity`: the mesh certificate issuer (Deployment, 2 replicas, no state). Its flags
 * come from its options table, each with its OUTRIGGER_<FLAG> variable (docs/cli.md).
 */
export function identityCommand(): Command {
  const cmd = new Command('identity').description(
    'serve the mesh certificate issuer: sidecars trade a service-account token (checked with TokenReview) and a CSR for a short-lived SPIFFE certificate',
  );
  const read = addTable(cmd, identityOptions);
  cmd.addHelpText('after', TABLE_HELP);
  return cmd.action(async (opts: Record<string, unknown>) => {
    const flags = loadTable<IdentityOptionName, IdentityConfig>(identityOptions, {
      ...read(opts),
      env: process.env,
    });
    const kubeconfig = flags.kubeconfig ?? (process.env.KUBECONFIG || undefined);
    const { checkTrustDomain } = await import('../mesh/spiffe.ts');
    const trustDomain = checkTrustDomain('--trust-domain', flags.trustDomain);
    const log = createLogger({ level: flags.logLevel as LogLevel, base: { component: 'identity' } });
    // Loaded on use: the sidecar, which builds this command tree in every pod, never loads the issuer.
    const { startIdentity } = await import('../compose/identity.ts');
    const host = flags.listenHost;
    const running = await startIdentity(
      {
        host,
        port: flags.httpsPort,
        caCert: flags.caCert,
        caKey: flags.caKey,
        ...(flags.trustBundle ? { trustBundle: flags.trustBundle } : {}),
        trustDomain,
        audience: flags.audience,
        ttlMs: flags.certTtl,
        servingNames: flags.servingNames,
        requireBoundPod: !flags.allowUnboundTokens,
        ...(kubeconfig ? { kubeconfig } : {}),
        tokenDir: flags.tokenDir,
        ...(flags.adminPort === undefined ? {} : { admin: { host, port: flags.adminPort } }),
        ...(flags.trustBundleNamespaces ? { bundleNamespaces: flags.trustBundleNamespaces } : {}),
      },
      { log },
    );
    const stop = (signal: string): void => {
      log.info('shutting down', { signal, delaySeconds: flags.shutdownDelay / 1000 });
      setTimeout(() => void running.close().then(() => process.exit(0)), flags.shutdownDelay);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}
