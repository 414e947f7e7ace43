import { Command, Option } from 'commander';
import { INJECTION_LABEL, TRUST_BUNDLE_CONFIGMAP } from '../config/options.ts';
import { OutriggerError } from '../shared/errors.ts';
import { createLogger, logLevels, type LogLevel } from '../shared/log.ts';

interface IdentityFlags {
  listen: string;
  adminListen: string;
  trustBundleNamespaces: string;
  caCert: string;
  caKey: string;
  trustBundle?: string;
  trustDomain: string;
  audience: string;
  certTtl: string;
  servingNames: string;
  allowUnboundTokens: boolean;
  kubeconfig?: string;
  tokenDir: string;
  logLevel: string;
  shutdownDelaySeconds: string;
}

const flagError = (flag: string, value: string, allowed: string): OutriggerError =>
  new OutriggerError('config_invalid', `invalid flag ${flag}=${JSON.stringify(value)}: ${allowed}`);

/** 60s, 90m, 24h or 30d, from one minute (rotation tests) to 90 days (Istio's maximum). */
export function parseTtl(flag: string, value: string): number {
  const m = /^(\d{1,6})(s|m|h|d)$/.exec(value.trim());
  const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  const ms = m ? Number(m[1]) * unit[m[2] as keyof typeof unit] : NaN;
  if (!(ms >= 60_000 && ms <= 90 * 86_400_000))
    throw flagError(flag, value, 'expected a duration such as 60s, 90m, 24h or 30d, from 60s to 90d');
  return ms;
}

function parseListen(listen: string, flag = '--listen'): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(listen);
  const port = Number(m?.[3]);
  if (!m || port > 65535) throw flagError(flag, listen, 'expected HOST:PORT');
  return { host: m[1] ?? (m[2] || '::'), port };
}

/** `outrigger identity`: the mesh certificate issuer (Deployment, 2 replicas, no state). */
export function identityCommand(): Command {
  const env = (o: Option, name: string): Option => o.env(`OUTRIGGER_IDENTITY_${name}`);
  return new Command('identity')
    .description(
      'serve the mesh certificate issuer: sidecars trade a service-account token (checked with TokenReview) and a CSR for a short-lived SPIFFE certificate',
    )
    .addOption(env(new Option('--listen <host:port>', 'HTTPS listen address').default(':8443'), 'LISTEN'))
    .addOption(
      env(
        new Option(
          '--admin-listen <host:port>',
          'plain HTTP: /metrics, /healthz, and /debug answered on loopback only; "off" for none',
        ).default(':7402'),
        'ADMIN_LISTEN',
      ),
    )
    .addOption(
      env(
        new Option(
          '--trust-bundle-namespaces <selector>',
          `label selector of the namespaces that get the trust-bundle ConfigMap ${TRUST_BUNDLE_CONFIGMAP}; "" for none`,
        ).default(`${INJECTION_LABEL}=enabled`),
        'TRUST_BUNDLE_NAMESPACES',
      ),
    )
    .addOption(
      env(
        new Option('--ca-cert <file>', 'signing CA certificate, then its intermediates (PEM)'),
        'CA_CERT',
      ).default('/etc/outrigger/ca/tls.crt'),
    )
    .addOption(
      env(new Option('--ca-key <file>', 'signing CA key (PEM)'), 'CA_KEY').default(
        '/etc/outrigger/ca/tls.key',
      ),
    )
    .addOption(
      env(
        new Option(
          '--trust-bundle <file>',
          'roots sidecars trust (PEM); default: --ca-cert when it is a self-signed root',
        ),
        'TRUST_BUNDLE',
      ),
    )
    .addOption(
      env(new Option('--trust-domain <name>', 'SPIFFE trust domain of issued ids'), 'TRUST_DOMAIN').default(
        'cluster.local',
      ),
    )
    .addOption(
      env(new Option('--audience <aud>', 'audience sidecar tokens must carry'), 'AUDIENCE').default(
        'outrigger-identity',
      ),
    )
    .addOption(
      env(
        new Option('--cert-ttl <duration>', 'lifetime of issued certificates, 60s to 90d'),
        'CERT_TTL',
      ).default('24h'),
    )
    .addOption(
      env(
        new Option(
          '--serving-names <names>',
          "comma-separated DNS names of the issuer's Service (its serving certificate)",
        ),
        'SERVING_NAMES',
      ).default(
        'outrigger-identity.outrigger-system.svc,outrigger-identity.outrigger-system.svc.cluster.local',
      ),
    )
    .addOption(
      env(
        new Option('--allow-unbound-tokens', 'also accept tokens bound to no pod (not recommended)'),
        'ALLOW_UNBOUND_TOKENS',
      ).default(false),
    )
    .addOption(
      new Option(
        '--kubeconfig <path>',
        'out-of-cluster API access (default: $KUBECONFIG, else in-cluster)',
      ).env('OUTRIGGER_KUBECONFIG'),
    )
    .addOption(
      env(
        new Option('--token-dir <dir>', "the issuer's own service-account token (in-cluster)"),
        'TOKEN_DIR',
      ).default('/var/run/secrets/kubernetes.io/serviceaccount'),
    )
    .addOption(
      env(new Option('--log-level <level>', 'log level').choices(logLevels), 'LOG_LEVEL').default('info'),
    )
    .addOption(
      env(
        new Option('--shutdown-delay-seconds <s>', 'keep serving after SIGTERM while endpoints update'),
        'SHUTDOWN_DELAY_SECONDS',
      ).default('5'),
    )
    .action(async (flags: IdentityFlags) => {
      const { host, port } = parseListen(flags.listen);
      const admin =
        flags.adminListen === 'off' ? undefined : parseListen(flags.adminListen, '--admin-listen');
      const bundleNamespaces = flags.trustBundleNamespaces.trim();
      // Label-selector characters only (keys, values, = != , in/notin lists, !key): a typo fails here,
      // not as an API error on every distribution round.
      if (!/^[A-Za-z0-9_./=!,() -]*$/.test(bundleNamespaces))
        throw flagError(
          '--trust-bundle-namespaces',
          flags.trustBundleNamespaces,
          'expected a label selector such as outrigger.dev/injection=enabled, or "" for none',
        );
      const kubeconfig = flags.kubeconfig ?? (process.env.KUBECONFIG || undefined);
      const ttlMs = parseTtl('--cert-ttl', flags.certTtl);
      const delay = Number(flags.shutdownDelaySeconds);
      if (!Number.isInteger(delay) || delay < 0 || delay > 300)
        throw flagError(
          '--shutdown-delay-seconds',
          flags.shutdownDelaySeconds,
          'expected an integer from 0 to 300',
        );
      const { checkTrustDomain } = await import('../mesh/spiffe.ts');
      const trustDomain = checkTrustDomain('--trust-domain', flags.trustDomain);
      const servingNames = flags.servingNames
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      if (servingNames.length === 0)
        throw flagError('--serving-names', flags.servingNames, 'expected at least one DNS name');
      const log = createLogger({ level: flags.logLevel as LogLevel, base: { component: 'identity' } });
      // Loaded on use: the sidecar, which builds this command tree in every pod, never loads the issuer.
      const { startIdentity } = await import('../compose/identity.ts');
      const running = await startIdentity(
        {
          host,
          port,
          caCert: flags.caCert,
          caKey: flags.caKey,
          ...(flags.trustBundle ? { trustBundle: flags.trustBundle } : {}),
          trustDomain,
          audience: flags.audience,
          ttlMs,
          servingNames,
          requireBoundPod: !flags.allowUnboundTokens,
          ...(kubeconfig ? { kubeconfig } : {}),
          tokenDir: flags.tokenDir,
          ...(admin ? { admin } : {}),
          ...(bundleNamespaces ? { bundleNamespaces } : {}),
        },
        { log },
      );
      const stop = (signal: string): void => {
        log.info('shutting down', { signal, delaySeconds: delay });
        setTimeout(() => void running.close().then(() => process.exit(0)), delay * 1000);
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
}
