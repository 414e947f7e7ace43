/** `outrigger gateway` as a process: configuration, the API connection, tracing, signals, drain. */
import { loadGatewayConfig, type GatewayOptionName } from '../config/gateway-options.ts';
import type { TableInputs } from '../config/resolve.ts';
import { systemClock } from '../shared/clock.ts';
import { createLogger, type LogLevel } from '../shared/log.ts';
import { memoryMetrics, processIdleTrim } from '../runtime/process-memory.ts';
import { startGateway, type Gateway } from './gateway.ts';
import { untilStopped } from './signals.ts';
import { openTracing, tracingMetrics } from './tracing.ts';

export async function runGateway(
  flags: Omit<TableInputs<GatewayOptionName>, 'env'>,
  env: Record<string, string | undefined> = process.env,
): Promise<void> {
  const config = loadGatewayConfig({ ...flags, env });
  const clock = systemClock;
  const log = createLogger({ level: config.logLevel as LogLevel, base: { component: 'outrigger-gateway' } });
  const { connectKube } = await import('../discovery/index.ts');
  const link = await connectKube(config, { clock, logger: log, env });
  const { tracing } = openTracing(config, { env, labels: {}, log });
  const trim = processIdleTrim(log);
  const traceMetrics = tracingMetrics(tracing);
  let gateway: Gateway;
  try {
    gateway = await startGateway(config, {
      api: link.transport,
      clock,
      log,
      ...(tracing.enabled ? { observer: tracing.observer } : {}),
      tuning: {
        transportStats: () => link.transport.stats,
        tokenExpiresAt: () => link.identity?.expiresAt(),
      },
      metricsExtra: () => ({ ...traceMetrics(), ...memoryMetrics(trim) }),
    });
  } catch (e) {
    await tracing.shutdown();
    link.close();
    throw e;
  }
  trim.start();
  log.info('outrigger gateway started', {
    ...gateway.ports(),
    watchNamespace: config.watchNamespace ?? '(all)',
  });
  await untilStopped(log, config.drainSeconds, () => {
    trim.stop();
    return gateway
      .drain(config.drainSeconds * 1000)
      .then(() => Promise.allSettled([gateway.close(), tracing.shutdown()]))
      .then(() => link.close());
  });
}
