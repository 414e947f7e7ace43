/**
 * `outrigger proxy`, the sidecar: the configuration (flags, env, pod annotations), discovery,
 * tracing, transparent capture's original destination, the data path over them, live options and
 * the drain on SIGTERM.
 */
import { join } from 'node:path';
import { loadConfig, type ConfigInputs } from '../config/load.ts';
import type { Config } from '../config/options.ts';
import type { OriginalDestination } from '../proxy/capture-port.ts';
import { systemClock, systemRandom } from '../shared/clock.ts';
import { createLogger, type LogLevel } from '../shared/log.ts';
import { memoryMetrics, processHeapStep, processIdleTrim } from '../runtime/process-memory.ts';
import { createDataPath } from './data-path.ts';
import { openDiscovery, openMeshRoutes } from './discovery.ts';
import { meshDeps, openMesh } from './mesh.ts';
import { annotationsFile, applyLiveOptions, readPodFile, watchAnnotations } from './live-options.ts';
import { untilStopped } from './signals.ts';
import { openTracing, tracingMetrics } from './tracing.ts';

export async function runSidecar(
  inputs: ConfigInputs,
  env: Record<string, string | undefined> = process.env,
): Promise<void> {
  const podInfoDir = loadConfig({ ...inputs, annotations: {} }).podInfoDir;
  const config = loadConfig({ ...inputs, annotations: readPodFile(annotationsFile(podInfoDir)) });
  const clock = systemClock;
  const log = createLogger({ level: config.logLevel as LogLevel, base: { component: 'outrigger' } });
  const discovery = await openDiscovery(config, { clock, random: systemRandom, log, env });
  const routes = await openMeshRoutes(config, discovery, clock, log).catch(async (e: unknown) => {
    await discovery.close();
    throw e;
  });
  const closeDiscovery = async (): Promise<void> => {
    await Promise.allSettled([routes?.stop(), discovery.close()]);
  };
  const mesh = await openMesh(config, { clock, log, env }).catch(async (e: unknown) => {
    await closeDiscovery();
    throw e;
  });
  const meshPart = meshDeps(mesh, config, env);
  const labels = readPodFile(join(podInfoDir, 'labels'));
  const zone = config.zone ?? labels['topology.kubernetes.io/zone'];
  const { tracing, pod } = openTracing(config, { env, labels, log });
  const originalDestination = await captureDestination(config);
  const traceMetrics = tracingMetrics(tracing);
  const trim = processIdleTrim(log);
  const heapStep = config.heapStep > 0 ? processHeapStep(config.heapStep) : undefined;
  const dataPath = createDataPath(config, {
    resolver: discovery,
    namespace: discovery.namespace,
    ...(pod.nodeName ? { nodeName: pod.nodeName } : {}),
    ...(zone ? { zone } : {}),
    ...(env.OUTRIGGER_POD_IP ? { podIP: env.OUTRIGGER_POD_IP } : {}),
    log,
    clock,
    // A disabled tracer is a no-op observer: leave it out of the per-request fan-out.
    ...(tracing.enabled ? { observer: tracing.observer } : {}),
    ...(originalDestination ? { originalDestination } : {}),
    configView: () => config,
    drainGraceMs: config.drainSeconds * 1000,
    metricsExtra: () => ({
      ...traceMetrics(),
      ...mesh?.identity.metrics(),
      ...memoryMetrics(trim, heapStep),
    }),
    ...meshPart,
    ...(routes ? { routes } : {}),
    debugExtra: { ...meshPart.debugExtra, ...(routes ? { routes: () => routes.status() } : {}) },
  });
  try {
    await dataPath.start();
  } catch (e) {
    // A port in use must not leave discovery's watches and timers holding the process open.
    mesh?.close();
    await Promise.allSettled([dataPath.close(), tracing.shutdown(), closeDiscovery()]);
    throw e;
  }
  trim.start();
  heapStep?.start();
  log.info('outrigger proxy started', {
    ...dataPath.ports(),
    capture: config.capture,
    source: config.source.kind,
  });

  const watcher = watchAnnotations(podInfoDir, log, () =>
    applyLiveOptions(inputs, readPodFile(annotationsFile(podInfoDir)), { log, tracing }),
  );

  await untilStopped(log, config.drainSeconds, () => {
    watcher?.close();
    trim.stop();
    heapStep?.stop();
    return dataPath.drain(config.drainSeconds * 1000).then(() => {
      mesh?.close();
      return Promise.allSettled([tracing.shutdown(), closeDiscovery(), dataPath.close()]);
    });
  });
}

/** Transparent capture: where a redirected connection was going (SO_ORIGINAL_DST). */
async function captureDestination(
  config: Pick<Config, 'capture' | 'egressPort' | 'ingressPort' | 'adminPort'>,
): Promise<OriginalDestination | undefined> {
  if (config.capture !== 'transparent') return undefined;
  const capture = await import('../proxy/capture/original-destination.ts');
  const listeners = [
    { address: '127.0.0.1', port: config.egressPort },
    { address: '::1', port: config.egressPort },
    { port: config.ingressPort },
    { port: config.adminPort },
  ];
  // A connection that was not redirected reports our own listener: that is no destination.
  return (socket) => {
    const d = capture.originalDestination(socket);
    return d && !capture.isOwnListener(d, listeners) ? d : undefined;
  };
}
