import * as p from './parse.ts';
import { httpsListener, shutdownDelay, type ServerSpec } from './server-options.ts';

/**
 * The settings of `outrigger webhook` that are its own (the injection defaults it serves are the
 * sidecar table's): each a flag and an OUTRIGGER_<FLAG> variable (docs/cli.md). Before 0.2 the
 * variables were OUTRIGGER_WEBHOOK_<FLAG>, the listener `--listen HOST:PORT` and the namespace
 * `--webhook-namespace` or POD_NAMESPACE; those still work for one release, with a warning.
 */
const opt = <T>(o: ServerSpec<T>): ServerSpec<T> => o;
const old = (name: string): string => `OUTRIGGER_WEBHOOK_${name}`;

export const webhookOptions = {
  ...httpsListener(old('LISTEN'), 8443),
  tlsCert: opt({
    flag: '--tls-cert <file>',
    env: 'OUTRIGGER_TLS_CERT',
    parser: p.nonEmpty,
    default: '/etc/outrigger/webhook-tls/tls.crt',
    describe: 'serving certificate (PEM), reloaded when it changes',
    was: { env: old('TLS_CERT') },
  }),
  tlsKey: opt({
    flag: '--tls-key <file>',
    env: 'OUTRIGGER_TLS_KEY',
    parser: p.nonEmpty,
    default: '/etc/outrigger/webhook-tls/tls.key',
    describe: 'serving key (PEM), reloaded with the certificate',
    was: { env: old('TLS_KEY') },
  }),
  podNamespace: opt<string | undefined>({
    flag: '--pod-namespace <ns>',
    env: 'OUTRIGGER_POD_NAMESPACE',
    parser: p.nonEmpty,
    default: undefined,
    describe: "the webhook's own namespace, never injected (outrigger install sets it from the pod)",
    was: { flag: '--webhook-namespace <ns>', env: 'POD_NAMESPACE' },
  }),
  shutdownDelay: shutdownDelay(old('SHUTDOWN_DELAY_SECONDS')),
};

export type WebhookOptionName = keyof typeof webhookOptions;
export type WebhookConfig = { [K in WebhookOptionName]: (typeof webhookOptions)[K]['default'] };
