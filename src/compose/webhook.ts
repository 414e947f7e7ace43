/**
 * `outrigger webhook`, the mutating admission webhook: the TLS server over the injection settings,
 * and a shutdown that keeps answering until the Service's endpoints drop this replica.
 */
import { startWebhookServer } from '../injector/server.ts';
import type { InjectorSettings } from '../injector/settings.ts';
import { systemClock } from '../shared/clock.ts';
import { createLogger, type LogLevel } from '../shared/log.ts';

export interface WebhookOptions {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  settings: InjectorSettings;
  logLevel: LogLevel;
  shutdownDelaySeconds: number;
}

export async function runWebhook(opts: WebhookOptions): Promise<void> {
  const log = createLogger({ level: opts.logLevel, base: { component: 'webhook' } });
  const server = await startWebhookServer({
    host: opts.host,
    port: opts.port,
    certFile: opts.certFile,
    keyFile: opts.keyFile,
    settings: opts.settings,
    log,
    clock: systemClock,
  });
  const delay = opts.shutdownDelaySeconds;
  const stop = (signal: string): void => {
    log.info('shutting down', { signal, delaySeconds: delay });
    // Keep answering until the Service's endpoints drop this replica, then stop.
    setTimeout(() => void server.close().then(() => process.exit(0)), delay * 1000);
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
