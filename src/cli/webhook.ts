import { Command, Option } from 'commander';
import { injectorSettings } from '../injector/settings.ts';
import { OutriggerError } from '../shared/errors.ts';
import type { LogLevel } from '../shared/log.ts';
import { addInjectionOptions, injectionDefaults } from './inject.ts';
import { checkWebhookTls } from './webhook-tls.ts';

interface WebhookFlags extends Record<string, unknown> {
  listen: string;
  tlsCert: string;
  tlsKey: string;
  webhookNamespace?: string;
  shutdownDelaySeconds: string;
}

function parseListen(listen: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(listen);
  const port = Number(m?.[3]);
  if (!m || port < 0 || port > 65535)
    throw new OutriggerError(
      'config_invalid',
      `invalid flag --listen=${JSON.stringify(listen)}: expected HOST:PORT`,
    );
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

/** `outrigger webhook`: the mutating admission webhook (Deployment, 2+ replicas). */
export function webhookCommand(): Command {
  const cmd = new Command('webhook')
    .description('serve the mutating admission webhook (AdmissionReview v1 over TLS)')
    .addOption(
      new Option('--listen <host:port>', 'HTTPS listen address')
        .env('OUTRIGGER_WEBHOOK_LISTEN')
        .default('0.0.0.0:8443'),
    )
    .addOption(
      new Option('--tls-cert <file>', 'serving certificate (PEM), reloaded when it changes')
        .env('OUTRIGGER_WEBHOOK_TLS_CERT')
        .default('/etc/outrigger/webhook-tls/tls.crt'),
    )
    .addOption(
      new Option('--tls-key <file>', 'serving key (PEM), reloaded with the certificate')
        .env('OUTRIGGER_WEBHOOK_TLS_KEY')
        .default('/etc/outrigger/webhook-tls/tls.key'),
    )
    .addOption(
      new Option('--webhook-namespace <ns>', "the webhook's own namespace, never injected").env(
        'OUTRIGGER_POD_NAMESPACE',
      ),
    )
    .addOption(
      new Option('--shutdown-delay-seconds <s>', 'keep serving after SIGTERM while endpoints update')
        .env('OUTRIGGER_WEBHOOK_SHUTDOWN_DELAY_SECONDS')
        .default('5'),
    );
  // --mesh-routes: the default of outrigger.dev/mesh-routes for the pods it injects.
  addInjectionOptions(cmd, ['logLevel', 'meshRoutes']);
  return cmd.action(async (flags: WebhookFlags) => {
    const defaults = injectionDefaults(flags);
    const { host, port } = parseListen(flags.listen);
    const delay = Number(flags.shutdownDelaySeconds);
    if (!Number.isInteger(delay) || delay < 0 || delay > 300)
      throw new OutriggerError(
        'config_invalid',
        `invalid flag --shutdown-delay-seconds=${JSON.stringify(flags.shutdownDelaySeconds)}: expected an integer from 0 to 300`,
      );
    checkWebhookTls(flags.tlsCert, flags.tlsKey);
    // Loaded on use, so `outrigger proxy` (in every pod) does not carry the webhook.
    const { runWebhook } = await import('../compose/webhook.ts');
    await runWebhook({
      host,
      port,
      certFile: flags.tlsCert,
      keyFile: flags.tlsKey,
      settings: injectorSettings(defaults, flags.webhookNamespace ?? legacyPodNamespace()),
      logLevel: defaults.logLevel as LogLevel,
      shutdownDelaySeconds: delay,
    });
  });
}

/** POD_NAMESPACE, the variable's name before 0.2: still read, with a warning, for one release. */
export function legacyPodNamespace(
  env: Record<string, string | undefined> = process.env,
  warn = (line: string): unknown => process.stderr.write(line),
): string | undefined {
  const ns = env.POD_NAMESPACE;
  if (ns)
    warn(
      'outrigger webhook: warning: POD_NAMESPACE is deprecated; set OUTRIGGER_POD_NAMESPACE (outrigger install does)\n',
    );
  return ns || undefined;
}
