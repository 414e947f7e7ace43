import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../../harness/tools.ts';

/**
 * A fresh process creates tracing at ratio 1, runs an unsampled hop (its parent said "not
 * sampled") and then a sampled one; it reports the modules loaded after each, and the spans its
 * exporter received.
 */
function run(): { unsampled: string[]; sampled: string[]; spans: string[]; traceparent: string } {
  const script = `
    import { registerHooks } from 'node:module';
    const loaded = [];
    registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
    const { createTracing } = await import(${JSON.stringify(path.join(repoRoot, 'src/tracing/index.ts'))});
    const spans = [];
    const exporter = {
      export(batch, done) { spans.push(...batch.map((s) => s.name)); done({ code: 0 }); },
      shutdown: () => Promise.resolve(),
    };
    const logger = { child: () => logger, debug() {}, info() {}, warn() {}, error() {} };
    const tracing = createTracing({ endpoint: undefined, exporter, sampling: 1, pod: {}, logger });
    const hop = (headers) => ({ direction: 'egress', method: 'GET', target: '/', authority: 'a', headers, protocol: 'http' });
    const quiet = tracing.observer.startHop(hop({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00' }));
    const out = {};
    quiet.inject(out);
    quiet.end({ status: 200 });
    const unsampled = [...loaded];
    const loud = tracing.observer.startHop(hop({}));
    loud.end({ status: 200 });
    await tracing.flush();
    process.stdout.write(JSON.stringify({ unsampled, sampled: [...loaded], spans, traceparent: out.traceparent }));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as ReturnType<typeof run>;
}

const SDK =
  /\/node_modules\/@opentelemetry\/(sdk-trace|exporter-trace-otlp-proto|resources|otlp-[a-z-]+)\/|\/src\/tracing\/sdk\.ts$/;

test('the SDK, exporter and resource modules load at the first sampled span, not before', () => {
  const r = run();
  assert.match(r.traceparent, /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-00$/);
  assert.deepEqual(
    r.unsampled.filter((u) => SDK.test(u)),
    [],
    'an unsampled hop only propagates: these belong in src/tracing/sdk.ts',
  );
  assert.ok(
    r.sampled.some((u) => u.endsWith('/src/tracing/sdk.ts')),
    'the sampled hop loaded the SDK',
  );
  assert.deepEqual(r.spans, ['GET'], 'and its span was exported');
});
