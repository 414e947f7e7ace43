// The README's test command after type-check and lint: unit tests, then integration and e2e tests
// against the real test cluster, then the container image and pods on a real node. Under CI=true a
// missing tool fails the run; it is never skipped.
import { spawnSync } from 'node:child_process';
import { globSync } from 'node:fs';

interface Suite {
  name: string;
  pattern: string;
  concurrency: number;
  timeoutMs?: number;
  /** Builds what the suite runs against; idempotent (seconds when cached), with progress when cold. */
  prepare?: { what: string; cmd: string[] }[];
}

const testCluster = (...args: string[]) => ['bash', 'scripts/test-cluster', ...args];
const clusterBinaries = { what: 'the test cluster binaries', cmd: testCluster('build') };
// The image and the node need root, podman and Linux namespaces; where they cannot run, their tests
// skip with the reason locally and fail under CI=true, so their builds are only tried where they can.
const canRunNode = process.platform === 'linux' && process.getuid?.() === 0;

// Unit test files run two at a time (they own their ports: listeners bind port 0, and the demo's
// fixed pod addresses are used by one file only). Each unit test gets at most 2 minutes, so a hang
// fails its test instead of the whole run's time budget.
const suites: Suite[] = [
  { name: 'unit', pattern: 'test/unit/**/*.test.ts', concurrency: 2, timeoutMs: 120_000 },
  {
    name: 'integration',
    pattern: 'test/integration/**/*.test.ts',
    concurrency: 1,
    prepare: [clusterBinaries],
  },
  { name: 'e2e', pattern: 'test/e2e/**/*.test.ts', concurrency: 1, prepare: [clusterBinaries] },
  {
    name: 'image',
    pattern: 'test/image/**/*.test.ts',
    concurrency: 1,
    prepare: canRunNode ? [{ what: 'the image', cmd: ['bash', 'scripts/build-image'] }] : [],
  },
  {
    name: 'node',
    pattern: 'test/node/**/*.test.ts',
    concurrency: 1,
    prepare: canRunNode
      ? [
          { what: "the node's binaries", cmd: testCluster('build', 'node') },
          { what: 'CoreDNS', cmd: testCluster('build', 'coredns') },
        ]
      : [],
  },
];

const only = process.argv.slice(2);
let failed = false;
const prepared = new Set<string>();

function prepare(suite: Suite): void {
  for (const step of suite.prepare ?? []) {
    const key = step.cmd.join(' ');
    if (prepared.has(key)) continue;
    prepared.add(key);
    const r = spawnSync(step.cmd[0] ?? '', step.cmd.slice(1), { stdio: 'inherit' });
    if (r.status === 0) continue;
    process.stderr.write(
      `building ${step.what} failed (${key}): the ${suite.name} tests will fail or skip\n`,
    );
    if (process.env.CI === 'true') failed = true;
  }
}

for (const suite of suites) {
  if (only.length > 0 && !only.includes(suite.name)) continue;
  const files = globSync(suite.pattern).sort();
  if (files.length === 0) continue;
  prepare(suite);
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
