// One sidecar process for scripts/bench/tracing-overhead.ts: the real data path (createDataPath,
// explicit capture, file source) with tracing per the mode, in its own process so the load
// generator and the backend do not share its event loop.
// argv: <mode: disabled|RATIO> <servicesFile> <otlpEndpoint>. Prints {"port":N} once ready, then on
// SIGTERM flushes and prints the span stats as one JSON line.
import { createDataPath } from '../../src/app.ts';
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
process.once('SIGTERM', () => {
  void (async () => {
    await sidecar.close();
    await resolver.close();
    await tracing.shutdown();
    process.stdout.write(JSON.stringify({ stats: tracing.stats() }) + '\n');
    process.exit(0);
  })();
});
