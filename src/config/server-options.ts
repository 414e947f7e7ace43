import * as p from './parse.ts';
import type { TableSpec } from './resolve.ts';

/**
 * The options the control plane's HTTPS servers (`identity`, `webhook`) share, and the old
 * HOST:PORT spelling of their `--listen` and `--admin-listen`, split into the `--listen-host` and
 * `--<role>-port` they became (docs/cli.md).
 */
export type ServerSpec<T> = TableSpec<T> & { describe: string };
const HOST_PORT = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/;
const allowed = 'HOST:PORT, such as 0.0.0.0:8443 or :8443';

function split(raw: string): { host: string | undefined; port: number } {
  const m = HOST_PORT.exec(raw.trim());
  const port = Number(m?.[3]);
  if (!m || port > 65535) throw new p.ValueError();
  return { host: m[1] ?? (m[2] || undefined), port };
}

/** The host of HOST:PORT; an empty host is every address, `::`. */
const hostOfListen: p.Parser<string> = { allowed, parse: (raw) => split(raw).host ?? '::' };
const portOfListen: p.Parser<number> = { allowed, parse: (raw) => split(raw).port };
export const portOfAdminListen: p.Parser<number | undefined> = {
  allowed: `${allowed}, or off`,
  parse: (raw) => (raw.trim() === 'off' ? undefined : split(raw).port),
};

/** --listen-host and --https-port, and their old spelling --listen HOST:PORT in `oldEnv` too. */
export function httpsListener(oldEnv: string, defaultPort: number) {
  const listen = { flag: '--listen <host:port>', env: oldEnv };
  return {
    listenHost: {
      flag: '--listen-host <address>',
      env: 'OUTRIGGER_LISTEN_HOST',
      parser: p.nonEmpty,
      default: '::',
      describe: 'address every listener binds',
      was: { ...listen, parser: hostOfListen },
    } satisfies ServerSpec<string>,
    httpsPort: {
      flag: '--https-port <port>',
      env: 'OUTRIGGER_HTTPS_PORT',
      parser: p.listenPort,
      default: defaultPort,
      describe: 'HTTPS listener port',
      was: { ...listen, parser: portOfListen },
    } satisfies ServerSpec<number>,
  };
}

export const shutdownDelay = (oldEnv: string): ServerSpec<number> => ({
  flag: '--shutdown-delay <duration>',
  env: 'OUTRIGGER_SHUTDOWN_DELAY',
  parser: p.duration(0, 300_000),
  default: 5_000,
  describe: 'after SIGTERM: how long to keep serving while endpoints update',
  was: { flag: '--shutdown-delay-seconds <s>', env: oldEnv, parser: p.countOf('s', 0, 300_000) },
});
