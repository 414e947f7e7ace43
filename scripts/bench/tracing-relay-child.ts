// One proxy process for scripts/bench/tracing-overhead.ts: a relay driving the tracing observer,
// in its own process so the load generator and the backend do not share its event loop.
// argv: <mode: disabled|RATIO> <backendPort> <otlpEndpoint>. Prints {"port":N}, then on SIGTERM
// flushes and prints the span stats as one JSON line.
import { createTracing, disabledTracing } from '../../src/tracing/index.ts';
import { createLogger } from '../../src/shared/log.ts';
import { startRelay } from '../../test/harness/tracing-relay.ts';

const [mode = 'disabled', backendPort = '0', endpoint = ''] = process.argv.slice(2);
const tracing =
  mode === 'disabled'
    ? disabledTracing()
    : createTracing({
        endpoint,
        sampling: Number(mode),
        pod: {
          name: 'bench-7d9f8b6c4d-x2x7q',
          namespace: 'bench',
          nodeName: 'local',
          labels: { app: 'bench' },
        },
        logger: createLogger({ level: 'warn' }),
      });
const relay = await startRelay({
  observer: tracing.observer,
  direction: 'egress',
  upstreamPort: Number(backendPort),
});
process.stdout.write(JSON.stringify({ port: relay.port }) + '\n');
process.once('SIGTERM', () => {
  void (async () => {
    await relay.close();
    await tracing.shutdown();
    process.stdout.write(JSON.stringify({ stats: tracing.stats() }) + '\n');
    process.exit(0);
  })();
});
