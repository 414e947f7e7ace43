// One sidecar process for scripts/bench/tracing-overhead.ts: the real data path (createDataPath,
// explicit capture, file source) with tracing per the mode, in its own process so the load
// generator and the backend do not share its event loop.
// argv: <mode: disabled|RATIO> <servicesFile> <otlpEndpoint>. Prints {"port":N} once ready. SIGUSR2
// marks the start of the measured run; SIGTERM flushes and prints the span stats and the CPU time
// used since the mark (the OTLP export included) as one JSON line.
import { createDataPath } from '../../src/compose/data-path.ts';
import { loadConfig } from '../../src/config/load.ts';
import { createFileResolver } from '../../src/discovery/file-source.ts';
import { systemClock } from '../../src/shared/clock.ts';
import { createLogger } from '../../src/shared/log.ts';
import { createTracing, disabledTracing } from '../../src/tracing/index.ts';

const [mode = 'disabled', servicesFile = '', endpoint = ''] = process.argv.slice(2);
const log = createLogger({ level: 'error' });
const tracing =
  mode === 'disabled'
    ? disabledTracing()
    : createTracing({
        endpoint,
        sampling: Number(mode),
        pod: { name: 'web-7d9f8b6c4d-x2x7q', namespace: 'bench', nodeName: 'local', labels: { app: 'web' } },
        logger: log,
      });
const resolver = createFileResolver({ path: servicesFile, clock: systemClock, logger: log });
await resolver.reload();
const config = { ...loadConfig({}), capture: 'explicit', egressPort: 0, ingressPort: 0, adminPort: 0 };
const sidecar = createDataPath(config, {
  resolver,
  namespace: 'bench',
  log,
  hosts: { egress: '127.0.0.1', ingress: '127.0.0.1', admin: '127.0.0.1' },
  ...(tracing.enabled ? { observer: tracing.observer } : {}),
});
await sidecar.start();
process.stdout.write(JSON.stringify({ port: sidecar.ports().egress }) + '\n');
let mark = process.cpuUsage();
process.on('SIGUSR2', () => void (mark = process.cpuUsage()));
process.once('SIGTERM', () => {
  void (async () => {
    await tracing.flush();
    const used = process.cpuUsage(mark);
    await sidecar.close();
    await resolver.close();
    await tracing.shutdown();
    const cpuMicros = used.user + used.system;
    process.stdout.write(JSON.stringify({ stats: tracing.stats(), cpuMicros }) + '\n');
    process.exit(0);
  })();
});
