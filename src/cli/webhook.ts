import { Command } from 'commander';
import { loadTable } from '../config/resolve.ts';
import { webhookOptions, type WebhookConfig, type WebhookOptionName } from '../config/webhook-options.ts';
import { injectorSettings } from '../injector/settings.ts';
import type { LogLevel } from '../shared/log.ts';
import { addInjectionOptions, injectionDefaults } from './inject.ts';
import { TABLE_HELP, addTable } from './option-table.ts';
import { checkWebhookTls } from './webhook-tls.ts';

/** `outrigger webhook`: the mutating admission webhook (Deployment, 2+ replicas). */
export function webhookCommand(): Command {
  const cmd = new Command('webhook').description(
    'serve the mutating admission webhook (AdmissionReview v1 over TLS)',
  );
  const read = addTable(cmd, webhookOptions);
  // --mesh-routes: the default of outrigger.dev/mesh-routes for the pods it injects.
  addInjectionOptions(cmd, ['logLevel', 'meshRoutes']);
  cmd.addHelpText('after', TABLE_HELP);
  return cmd.action(async (opts: Record<string, unknown>) => {
    const defaults = injectionDefaults(opts);
    const flags = loadTable<WebhookOptionName, WebhookConfig>(webhookOptions, {
      ...read(opts),
      env: process.env,
    });
    checkWebhookTls(flags.tlsCert, flags.tlsKey);
    // Loaded on use, so `outrigger proxy` (in every pod) does not carry the webhook.
    const { runWebhook } = await import('../compose/webhook.ts');
    await runWebhook({
      host: flags.listenHost,
      port: flags.httpsPort,
      certFile: flags.tlsCert,
      keyFile: flags.tlsKey,
      settings: injectorSettings(defaults, flags.podNamespace),
      logLevel: defaults.logLevel as LogLevel,
      shutdownDelaySeconds: flags.shutdownDelay / 1000,
    });
  });
}
