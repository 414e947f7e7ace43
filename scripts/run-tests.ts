// The README's test command after type-check and lint: unit tests, then integration and e2e tests
// against the real test cluster. Under CI=true a missing tool fails the run; it is never skipped.
import { spawnSync } from 'node:child_process';
import { globSync } from 'node:fs';

// Unit test files run two at a time (they own their ports: listeners bind port 0, and the demo's
// fixed pod addresses are used by one file only). Each unit test gets at most 2 minutes, so a hang
// fails its test instead of the whole run's time budget.
const suites: { name: string; pattern: string; concurrency: number; timeoutMs?: number }[] = [
  { name: 'unit', pattern: 'test/unit/**/*.test.ts', concurrency: 2, timeoutMs: 120_000 },
  { name: 'integration', pattern: 'test/integration/**/*.test.ts', concurrency: 1 },
  { name: 'e2e', pattern: 'test/e2e/**/*.test.ts', concurrency: 1 },
];

const only = process.argv.slice(2);
let failed = false;

// Integration and e2e tests need the Go-built test binaries. Building is idempotent (seconds when
// cached) and shows progress on a cold build; without Go the tests skip locally and fail in CI.
if (only.length === 0 || only.some((s) => s !== 'unit')) {
  const build = spawnSync('bash', ['scripts/test-cluster', 'build'], { stdio: 'inherit' });
  if (build.status !== 0) {
    process.stderr.write('scripts/test-cluster build failed: integration tests will fail or skip\n');
    if (process.env.CI === 'true') failed = true;
  }
}
for (const suite of suites) {
  if (only.length > 0 && !only.includes(suite.name)) continue;
  const files = globSync(suite.pattern).sort();
  if (files.length === 0) continue;
  process.stdout.write(`\n== ${suite.name} tests (${files.length} files) ==\n`);
  const r = spawnSync(
    process.execPath,
    [
      '--test',
      `--test-concurrency=${suite.concurrency}`,
      ...(suite.timeoutMs ? [`--test-timeout=${suite.timeoutMs}`] : []),
      '--test-reporter=spec',
      ...files,
    ],
    { stdio: 'inherit' },
  );
  if (r.status !== 0) failed = true;
}
process.exitCode = failed ? 1 : 0;
